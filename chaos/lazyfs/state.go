package lazyfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// pageSize is the granularity of the pending-write overlay. It matches the
// kernel page size so a page-cache writeback lands on whole pages.
const pageSize = 4096

// fileState is the lazy view of one backing inode: the backing file holds
// what was last made durable, pages holds every page written since.
//
// Invariants (under mu):
//   - base <= size and base <= durable (the backing file's length);
//   - bytes [0, base) not covered by a page read from the backing file;
//   - bytes [base, size) not covered by a page read as zeros;
//   - a page holds the full current view of its range, zeros past size.
type fileState struct {
	mu      sync.Mutex
	ino     uint64
	f       *os.File
	size    int64
	base    int64
	durable int64
	pages   map[int64][]byte
	// dirtiedAt is when the state last went from clean to dirty (zero
	// while clean): Linux's inode dirtied_when, which the writeback
	// model ages.
	dirtiedAt time.Time
	opens     int
	// detached is set once the last name of the inode is gone; the state
	// then lives only as long as open handles do.
	detached bool
}

func newFileState(ino uint64, f *os.File) (*fileState, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat backing %s: %w", f.Name(), err)
	}
	n := fi.Size()
	return &fileState{ino: ino, f: f, size: n, base: n, durable: n, pages: map[int64][]byte{}}, nil
}

// dirty reports whether the state holds changes the backing file lacks.
func (s *fileState) dirty() bool {
	return len(s.pages) > 0 || s.size != s.durable || s.base != s.durable
}

// touch starts the dirty clock if this change made the state dirty.
func (s *fileState) touch() {
	if s.dirtiedAt.IsZero() && s.dirty() {
		s.dirtiedAt = time.Now()
	}
}

// writebackDue reports whether the writeback model writes the state back
// at now: it has been dirty for at least age.
func (s *fileState) writebackDue(now time.Time, age time.Duration) bool {
	return s.dirty() && !s.dirtiedAt.IsZero() && now.Sub(s.dirtiedAt) >= age
}

// pendingBytes is the memory the overlay holds.
func (s *fileState) pendingBytes() int64 {
	return int64(len(s.pages)) * pageSize
}

// readAt fills dst from the lazy view and returns how many bytes it read
// (short only at the logical end of file).
func (s *fileState) readAt(dst []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, nil
	}
	n := int(min(int64(len(dst)), s.size-off))
	dst = dst[:n]
	for done := 0; done < n; {
		pos := off + int64(done)
		pg, in := pos/pageSize, int(pos%pageSize)
		if p, ok := s.pages[pg]; ok {
			done += copy(dst[done:], p[in:])
			continue
		}
		run := s.cleanRun(pos, n-done)
		if err := s.readBase(dst[done:done+run], pos); err != nil {
			return done, err
		}
		done += run
	}
	return n, nil
}

// cleanRun is the length of the run starting at pos, at most max bytes,
// that no dirty page covers.
func (s *fileState) cleanRun(pos int64, max int) int {
	run := 0
	for run < max {
		p := pos + int64(run)
		if _, ok := s.pages[p/pageSize]; ok {
			break
		}
		run += int(min(int64(max-run), pageSize-p%pageSize))
	}
	return run
}

// readBase reads the durable bytes of [pos, pos+len(dst)): backing data
// below base, zeros above it.
func (s *fileState) readBase(dst []byte, pos int64) error {
	clear(dst)
	if pos >= s.base {
		return nil
	}
	m := min(int64(len(dst)), s.base-pos)
	_, err := s.f.ReadAt(dst[:m], pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read backing %s at %d: %w", s.f.Name(), pos, err)
	}
	return nil
}

// writeAt puts data in the overlay; nothing reaches the backing file.
func (s *fileState) writeAt(data []byte, off int64) error {
	for done := 0; done < len(data); {
		pos := off + int64(done)
		p, err := s.page(pos / pageSize)
		if err != nil {
			return err
		}
		done += copy(p[pos%pageSize:], data[done:])
	}
	s.size = max(s.size, off+int64(len(data)))
	s.touch()
	return nil
}

// page returns the dirty page pg, loading it from the durable view first.
func (s *fileState) page(pg int64) ([]byte, error) {
	if p, ok := s.pages[pg]; ok {
		return p, nil
	}
	p := make([]byte, pageSize)
	if err := s.readBase(p, pg*pageSize); err != nil {
		return nil, err
	}
	s.pages[pg] = p
	return p, nil
}

// truncate sets the logical size. Shrinking hides the cut bytes for good
// (base moves down), so growing again exposes zeros, as on a real file.
func (s *fileState) truncate(n int64) {
	if n < s.size {
		for pg := range s.pages {
			if pg*pageSize >= n {
				delete(s.pages, pg)
			}
		}
		if p, ok := s.pages[n/pageSize]; ok {
			clear(p[n%pageSize:])
		}
		s.base = min(s.base, n)
	}
	s.size = n
	s.touch()
}

// commit makes the lazy view durable: the backing file gets exactly the
// bytes a reader sees. With syncBacking it is fsynced as well. A failed
// commit keeps the overlay; the backing file may hold part of it, as a disk
// may after a failed fsync.
func (s *fileState) commit(syncBacking bool) error {
	if err := s.flushOverlay(syncBacking); err != nil {
		if fi, e := s.f.Stat(); e == nil {
			s.durable = fi.Size()
			s.base = min(s.base, s.durable)
		}
		return err
	}
	clear(s.pages)
	s.base, s.durable = s.size, s.size
	s.dirtiedAt = time.Time{}
	return nil
}

func (s *fileState) flushOverlay(syncBacking bool) error {
	if s.durable > s.base {
		if err := s.f.Truncate(s.base); err != nil {
			return fmt.Errorf("truncate backing %s: %w", s.f.Name(), err)
		}
	}
	if err := s.writePages(); err != nil {
		return err
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("truncate backing %s: %w", s.f.Name(), err)
	}
	if syncBacking {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("fsync backing %s: %w", s.f.Name(), err)
		}
	}
	return nil
}

// writePages writes dirty pages in offset order, each clipped to size.
func (s *fileState) writePages() error {
	idx := make([]int64, 0, len(s.pages))
	for pg := range s.pages {
		idx = append(idx, pg)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, pg := range idx {
		start := pg * pageSize
		end := min(start+pageSize, s.size)
		if end <= start {
			continue
		}
		if _, err := s.f.WriteAt(s.pages[pg][:end-start], start); err != nil {
			return fmt.Errorf("write backing %s at %d: %w", s.f.Name(), start, err)
		}
	}
	return nil
}

// lose drops every pending write: the view reverts to the backing file.
func (s *fileState) lose() (dropped int64, err error) {
	dropped = s.pendingBytes()
	clear(s.pages)
	s.dirtiedAt = time.Time{}
	fi, err := s.f.Stat()
	if err != nil {
		return dropped, fmt.Errorf("stat backing %s: %w", s.f.Name(), err)
	}
	s.size, s.base, s.durable = fi.Size(), fi.Size(), fi.Size()
	return dropped, nil
}
