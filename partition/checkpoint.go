package partition

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

const (
	checkpointName  = "partition.checkpoint"
	checkpointMagic = "raftq partition checkpoint v1"
)

// checkpoint is the log's small durable state besides its segments.
//
// start is the log start offset (DeleteRecords and retention can move it
// into the middle of a segment). recovery is an offset below which every
// byte, segment file and index file is known durable: recovery trusts those
// segments after a cheap tail check instead of reading them whole.
type checkpoint struct {
	start    int64
	recovery int64
}

func encodeCheckpoint(c checkpoint) []byte {
	body := fmt.Appendf(nil, "%s\nstart %d\nrecovery %d\n", checkpointMagic, c.start, c.recovery)
	return fmt.Appendf(body, "crc %08x\n", crc32.Checksum(body, castagnoli))
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	i := bytes.LastIndex(b, []byte("crc "))
	if i < 0 {
		return checkpoint{}, fmt.Errorf("checkpoint: no crc line")
	}
	var sum uint32
	if _, err := fmt.Sscanf(string(b[i:]), "crc %08x\n", &sum); err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint: crc line: %w", err)
	}
	if got := crc32.Checksum(b[:i], castagnoli); got != sum {
		return checkpoint{}, fmt.Errorf("checkpoint: crc %08x, file says %08x", got, sum)
	}
	var c checkpoint
	if _, err := fmt.Sscanf(string(b[:i]), checkpointMagic+"\nstart %d\nrecovery %d\n", &c.start, &c.recovery); err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	if c.start < 0 || c.recovery < 0 {
		return checkpoint{}, fmt.Errorf("checkpoint: negative offset")
	}
	if !bytes.Equal(encodeCheckpoint(c), b) {
		return checkpoint{}, fmt.Errorf("checkpoint: not in canonical form")
	}
	return c, nil
}

// writeCheckpoint replaces the checkpoint durably (internal/durable,
// through the Log's FS) and remembers it.
func (l *Log) writeCheckpoint(c checkpoint) error {
	w := durable.Writer{FS: durableFS{l.fs}, AfterTemp: func() { l.crashPoint("checkpoint-tmp-written") }}
	if err := w.WriteFile(filepath.Join(l.dir, checkpointName), encodeCheckpoint(c), 0o644); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	l.cp = c
	return nil
}

// readCheckpoint returns the checkpoint, a zero one when there is none, or
// an error when it exists but does not decode.
func readCheckpoint(fsys FS, dir string) (checkpoint, bool, error) {
	b, err := readFile(fsys, filepath.Join(dir, checkpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	c, err := decodeCheckpoint(b)
	return c, err == nil, err
}
