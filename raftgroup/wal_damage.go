package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"

	"github.com/raftq/raftq/internal/durable"
)

// WALDamageError is a WAL damaged other than by a torn last write: a
// record that fails its CRC, a segment cut short or missing its end.
// etcd's wal.Repair mends
// only a torn tail, and replaying what is left would bring the node back
// without votes and log entries it acknowledged: as a voter it could
// then elect a leader that lacks committed entries. So the node refuses
// to start; the way back is to remove it and add it anew, empty.
type WALDamageError struct {
	Dir  string
	File string // the damaged segment, when known
	Err  error
}

func (e *WALDamageError) Error() string {
	return fmt.Sprintf("raftgroup: wal %s is damaged (%s: %v): this node lost raft state (votes, acknowledged entries) "+
		"and must not rejoin as the same member; decommission and remove it (raftq cluster decommission N --wait; "+
		"raftq cluster remove N), then start it on an empty data dir with --seeds", e.Dir, e.File, e.Err)
}

func (e *WALDamageError) Unwrap() error { return e.Err }

// ErrWALTruncated is a WAL segment shorter than it should be.
var ErrWALTruncated = errors.New("raftgroup: wal segment truncated")

// walSegments lists dir's WAL segment files in order (etcd's names sort
// by sequence); retired and temporary files are not among them.
func walSegments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".wal") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkWAL looks for damage in the WAL in dir that is not a torn last
// write, before etcd reads it: every segment is decoded on its own, its
// records checked against their CRCs and its first (CRC) record against
// the running CRC the segment before ended with, so that a segment cut at
// a record boundary is found too.
//
// A cut of the last segment would pass for a torn write, which
// wal.Repair drops, entries and votes the node acknowledged with it; but
// its size tells: etcd preallocates every segment to wal.SegmentSizeBytes
// and cuts to the next only once a segment has reached that size
// (truncating it to its records, never below), so a crash never leaves a
// segment shorter. Only wal.Repair does, and readWAL grows the segment
// back after it. The bound is the smallest segment size this WAL was
// ever written with (minSegmentBytes), so that raising
// --wal-segment-bytes on an old data dir is no truncation. Without
// sized (fsync never: a power loss may undo a preallocation) sizes are
// not checked.
func checkWAL(dir string, sized bool) error {
	names, err := walSegments(dir)
	if err != nil || len(names) == 0 {
		return err
	}
	least, err := minSegmentBytes(dir)
	if !sized {
		least = 0
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if st.Size() < least {
			return &WALDamageError{Dir: dir, File: name, Err: fmt.Errorf("%w: %d bytes, below the %d every segment reaches", ErrWALTruncated, st.Size(), least)}
		}
	}
	var prev uint32 // the running CRC the last segment ended with; 0 unknown
	for i, name := range names {
		last := i == len(names)-1
		next, err := checkSegment(filepath.Join(dir, name), prev, last)
		if errors.Is(err, errPrevCut) && i > 0 {
			return &WALDamageError{Dir: dir, File: names[i-1], Err: fmt.Errorf("%w: it ends before its last record (the next segment's CRC does not follow on)", ErrWALTruncated)}
		}
		if err != nil {
			return &WALDamageError{Dir: dir, File: name, Err: err}
		}
		prev = next
	}
	return nil
}

var errPrevCut = errors.New("crc chain broken")

// checkSegment decodes one segment and returns the running CRC at its
// end. A torn last record of the last segment is left to wal.Repair.
func checkSegment(path string, prev uint32, last bool) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	first := true
	for {
		rec := &walpb.Record{}
		err := dec.Decode(rec)
		switch {
		case errors.Is(err, io.EOF):
			return dec.LastCRC(), nil
		case errors.Is(err, io.ErrUnexpectedEOF) && last:
			if at, ok := writtenAfter(f, dec.LastOffset()); ok {
				return 0, fmt.Errorf("%w: the record at %d fails its check, but records follow it at %d: not a torn write", wal.ErrCRCMismatch, dec.LastOffset(), at)
			}
			return 0, nil // a torn tail: wal.Repair's
		case errors.Is(err, io.ErrUnexpectedEOF):
			return 0, fmt.Errorf("%w: it ends inside a record", ErrWALTruncated)
		case err != nil:
			return 0, err
		}
		if rec.GetType() == wal.CrcType {
			if first && prev != 0 && rec.GetCrc() != prev {
				return 0, errPrevCut
			}
			if crc := dec.LastCRC(); crc != 0 && rec.Validate(crc) != nil {
				return 0, wal.ErrCRCMismatch
			}
			dec.UpdateCRC(rec.GetCrc())
		}
		first = false
	}
}

// minSegmentBytes returns the smallest segment size the WAL in dir was
// written with, as <dir>.segment-bytes records it beside the directory
// (etcd warns about foreign files inside), recording the current size
// when it is smaller or the file new. A data dir from before the file
// takes the current size.
func minSegmentBytes(dir string) (int64, error) {
	path := filepath.Clean(dir) + ".segment-bytes"
	least := wal.SegmentSizeBytes
	b, err := os.ReadFile(path)
	if err == nil {
		if n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); perr == nil && n > 0 && n <= least {
			return n, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := durable.WriteFile(path, []byte(strconv.FormatInt(least, 10)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("record wal segment size: %w", err)
	}
	return least, nil
}

// regrowLast extends the last segment back to wal.SegmentSizeBytes with
// zeros after wal.Repair cut its torn tail, as preallocation left it, so
// that checkWAL keeps telling truncations from tears.
func regrowLast(dir string) error {
	names, err := walSegments(dir)
	if err != nil || len(names) == 0 {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, names[len(names)-1]), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && st.Size() < wal.SegmentSizeBytes {
		err = f.Truncate(wal.SegmentSizeBytes)
		if err == nil {
			err = f.Sync()
		}
	}
	return errors.Join(err, f.Close())
}

// writtenAfter reports whether the segment holds a non-zero byte after
// the record at off claims to end, and where. A torn write is the last
// one: what follows its record is preallocated zeros. A record that
// fails its check with data after it was damaged in place (etcd's
// decoder takes any record holding a zero sector for torn). A length
// that claims past the file end cannot be judged, and passes.
func writtenAfter(f *os.File, off int64) (int64, bool) {
	var frame [8]byte
	if _, err := f.ReadAt(frame[:], off); err != nil {
		return 0, false
	}
	n := binary.LittleEndian.Uint64(frame[:])
	end := off + 8 + int64(n&^(uint64(0xff)<<56)) + int64(n>>56&0x7)*int64(n>>63)
	buf := make([]byte, 64<<10)
	for pos := end; ; pos += int64(len(buf)) {
		k, err := f.ReadAt(buf, pos)
		for i, b := range buf[:k] {
			if b != 0 {
				return pos + int64(i), true
			}
		}
		if err != nil {
			return 0, false
		}
	}
}
