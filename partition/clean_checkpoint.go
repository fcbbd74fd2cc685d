package partition

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

// The cleaner checkpoint holds where the last cleaning ended: the dirty
// part of the next one starts there. Losing it (or a damaged one) only
// makes the next cleaning treat the whole log as dirty.
const (
	cleanerCheckpointName  = "cleaner.checkpoint"
	cleanerCheckpointMagic = "raftq cleaner checkpoint v1"
)

func encodeCleanerCheckpoint(offset int64) []byte {
	body := fmt.Appendf(nil, "%s\ncleaned %d\n", cleanerCheckpointMagic, offset)
	return fmt.Appendf(body, "crc %08x\n", crc32.Checksum(body, castagnoli))
}

func decodeCleanerCheckpoint(b []byte) (int64, error) {
	var off int64
	var sum uint32
	if _, err := fmt.Sscanf(string(b), cleanerCheckpointMagic+"\ncleaned %d\ncrc %08x\n", &off, &sum); err != nil {
		return 0, fmt.Errorf("cleaner checkpoint: %w", err)
	}
	if off < 0 || string(encodeCleanerCheckpoint(off)) != string(b) {
		return 0, errors.New("cleaner checkpoint: damaged")
	}
	return off, nil
}

// readCleanerCheckpoint returns where the last cleaning ended, 0 if
// unknown.
func (l *Log) readCleanerCheckpoint() (int64, error) {
	b, err := readFile(l.fs, filepath.Join(l.dir, cleanerCheckpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	off, err := decodeCleanerCheckpoint(b)
	if err != nil {
		l.logger.Warn("ignoring the cleaner checkpoint; the next cleaning reads the whole log", "err", err)
		return 0, nil
	}
	return off, nil
}

func (l *Log) writeCleanerCheckpoint(offset int64) error {
	w := durable.Writer{FS: durableFS{l.fs}, AfterTemp: func() { l.crashPoint("cleaner-checkpoint-tmp-written") }}
	if err := w.WriteFile(filepath.Join(l.dir, cleanerCheckpointName), encodeCleanerCheckpoint(offset), 0o644); err != nil {
		return fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return nil
}
