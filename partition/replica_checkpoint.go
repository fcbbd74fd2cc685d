package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

const replicaCheckpointName = "replica.checkpoint"

// replicaCheckpoint is the replica's state as of raft index Applied: the log
// holds exactly [Start, Next) durably, and Producers and Epochs describe it.
// It is also the data of the group's raft snapshots.
type replicaCheckpoint struct {
	Applied   uint64                   `json:"applied"`
	Start     int64                    `json:"start"`
	Next      int64                    `json:"next"`
	Producers map[int64]*ProducerState `json:"producers,omitempty"`
	Epochs    epochCache               `json:"epochs,omitempty"`
	// Txns are the transactions open at Next, those whose first batch
	// lies below a new log start included: a replica whose log restarts
	// empty at Next (rewind) is seeded with them.
	Txns []OngoingTxn `json:"txns,omitempty"`
}

func (c *replicaCheckpoint) encode() ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return sealCheckpoint(body), nil
}

// sealCheckpoint turns a checkpoint's JSON body into the file's contents: the body, then its
// CRC-32C on a line of its own.
func sealCheckpoint(body []byte) []byte {
	out := make([]byte, 0, len(body)+10)
	out = append(out, body...)
	return fmt.Appendf(out, "\n%08x\n", crc32.Checksum(body, castagnoli))
}

// unsealCheckpoint checks the CRC line sealCheckpoint added and returns
// the body; what names the checkpoint in errors.
func unsealCheckpoint(b []byte, what string) ([]byte, error) {
	i := bytes.LastIndexByte(bytes.TrimSuffix(b, []byte("\n")), '\n')
	if i < 0 {
		return nil, fmt.Errorf("%w: %s without crc", ErrCorruptLog, what)
	}
	var sum uint32
	if _, err := fmt.Sscanf(string(b[i+1:]), "%08x\n", &sum); err != nil || sum != crc32.Checksum(b[:i], castagnoli) {
		return nil, fmt.Errorf("%w: %s crc mismatch", ErrCorruptLog, what)
	}
	return b[:i], nil
}

func decodeReplicaCheckpoint(b []byte) (replicaCheckpoint, error) {
	var c replicaCheckpoint
	body, err := unsealCheckpoint(b, "replica checkpoint")
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("%w: replica checkpoint: %w", ErrCorruptLog, err)
	}
	return c, nil
}

func readReplicaCheckpoint(fsys FS, dir string) (replicaCheckpoint, error) {
	b, err := readFile(fsys, filepath.Join(dir, replicaCheckpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return replicaCheckpoint{}, nil
	}
	if err != nil {
		return replicaCheckpoint{}, fmt.Errorf("read replica checkpoint: %w", err)
	}
	return decodeReplicaCheckpoint(b)
}

// writeReplicaCheckpoint replaces the checkpoint durably
// (internal/durable).
func writeReplicaCheckpoint(fsys FS, dir string, c *replicaCheckpoint) error {
	b, err := c.encode()
	if err != nil {
		return err
	}
	return writeReplicaCheckpointFile(fsys, dir, b)
}

// writeReplicaCheckpointFile replaces the checkpoint with an encoded one.
func writeReplicaCheckpointFile(fsys FS, dir string, b []byte) error {
	w := durable.Writer{FS: durableFS{fsys}}
	if err := w.WriteFile(filepath.Join(dir, replicaCheckpointName), b, 0o644); err != nil {
		return fmt.Errorf("write replica checkpoint: %w", err)
	}
	return nil
}
