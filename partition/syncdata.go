package partition

import (
	"errors"
	"fmt"
	"io/fs"
)

// SyncData makes every batch appended before the call durable, like Sync,
// but without holding up appenders while the disk works: it notes the
// dirty files under the write lock, then fsyncs them with the lock
// released. A raft snapshot uses it so that its fsyncs, often of many
// megabytes, never stall the apply loop.
//
// A segment that retention removes meanwhile keeps its open file until
// SyncData lets go of it. SyncData must not run concurrently with Sync,
// Truncate, Reset or another SyncData (the replica's group serialises
// them); Append, Roll, AdvanceStart and reads may run alongside. It
// advances the recovery checkpoint when it synced sealed segments, as Sync
// does.
func (l *Log) SyncData() error {
	l.writeMu.Lock()
	if err := l.writable(); err != nil {
		l.writeMu.Unlock()
		return err
	}
	job := l.takeDirty()
	l.writeMu.Unlock()
	defer job.release()
	if err := job.sync(l.fs, l.dir); err != nil {
		return l.fail(err)
	}
	if !job.sealed {
		return nil
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	cp := checkpoint{start: l.cp.start, recovery: max(l.cp.recovery, job.activeBase)}
	if cp == l.cp {
		return nil
	}
	if err := l.writeCheckpoint(cp); err != nil {
		return l.fail(err)
	}
	return nil
}

// syncJob is the set of files one SyncData flushes.
type syncJob struct {
	segs       []*segment // referenced until release
	data       []bool     // segs[i] has unsynced log bytes
	index      []bool     // segs[i] has unsynced index files
	dir        bool
	sealed     bool  // a sealed segment is among segs
	activeBase int64 // base of the active segment when taken
}

// takeDirty collects the unsynced files and marks them clean, so that a
// write that lands during the fsync marks its segment dirty again. The
// directory flag stays set: retention relies on it to order deletions
// after creations, and only Sync clears it. Callers hold writeMu.
func (l *Log) takeDirty() *syncJob {
	a := l.active()
	job := &syncJob{dir: l.dirDirty, activeBase: a.base}
	for _, s := range l.segs {
		if !s.unsynced && !s.indexUnsynced {
			continue
		}
		s.acquire()
		job.segs = append(job.segs, s)
		job.data = append(job.data, s.unsynced)
		job.index = append(job.index, s.indexUnsynced)
		job.sealed = job.sealed || s != a
		s.unsynced, s.indexUnsynced = false, false
	}
	return job
}

func (j *syncJob) sync(fsys FS, dir string) error {
	for i, s := range j.segs {
		if j.data[i] {
			if err := s.f.Sync(); err != nil {
				return fmt.Errorf("sync segment %d: %w", s.base, err)
			}
		}
		if !j.index[i] {
			continue
		}
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			// Retention may have removed the segment since: nothing
			// of it needs to last then.
			if err := syncFile(fsys, s.path+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("sync segment %d: %w", s.base, err)
			}
		}
	}
	if j.dir {
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}
	return nil
}

func (j *syncJob) release() {
	for _, s := range j.segs {
		s.release()
	}
}
