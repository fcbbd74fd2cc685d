package partition

import (
	"context"
	"sync"
	"sync/atomic"
)

// watched is an int64 that goroutines can wait on without polling: watch
// returns the value together with a channel that is closed at the next
// change (or at shut). Channels are made only when someone watches, so an
// unwatched value costs an atomic store per change.
type watched struct {
	val    atomic.Int64
	mu     sync.Mutex
	ch     chan struct{}
	closed bool
}

func (w *watched) load() int64 { return w.val.Load() }

func (w *watched) set(v int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.val.Load() == v {
		return
	}
	w.val.Store(v)
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// watch returns the value and a channel closed when it next changes. After
// shut the channel is already closed and ok is false.
func (w *watched) watch() (v int64, changed <-chan struct{}, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		c := make(chan struct{})
		close(c)
		return w.val.Load(), c, false
	}
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.val.Load(), w.ch, true
}

// shut wakes every watcher for good.
func (w *watched) shut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// HighWatermark returns the high watermark: the offset after the last batch
// consumers may see.
func (l *Log) HighWatermark() int64 { return l.hw.load() }

// SetHighWatermark moves the high watermark (down too, as an ISR follower's
// truncation needs) and wakes its waiters. It may not pass the log end.
func (l *Log) SetHighWatermark(hw int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if end := l.active().next; hw > end {
		return &OffsetOutOfRangeError{Offset: hw, Start: l.start, End: end}
	}
	l.setHW(hw)
	return nil
}

// WatchHighWatermark returns the high watermark and a channel closed when it
// next changes or the log closes. A fetch long-poll over many partitions
// selects on several of these.
func (l *Log) WatchHighWatermark() (hw int64, changed <-chan struct{}) {
	hw, changed, _ = l.hw.watch()
	return hw, changed
}

// WatchEnd is WatchHighWatermark for the log end offset (ISR followers
// fetch up to the end, not the high watermark).
func (l *Log) WatchEnd() (end int64, changed <-chan struct{}) {
	end, changed, _ = l.end.watch()
	return end, changed
}

// WaitHighWatermark blocks until the high watermark is above offset and
// returns it, or returns ctx's error, or ErrClosed.
func (l *Log) WaitHighWatermark(ctx context.Context, offset int64) (int64, error) {
	return l.hw.waitAbove(ctx, offset)
}

// WaitLastStableOffset is WaitHighWatermark for the last stable offset.
func (l *Log) WaitLastStableOffset(ctx context.Context, offset int64) (int64, error) {
	return l.lso.waitAbove(ctx, offset)
}

// waitAbove blocks until the value is above offset and returns it, or
// returns ctx's error, or ErrClosed once shut.
func (w *watched) waitAbove(ctx context.Context, offset int64) (int64, error) {
	for {
		v, changed, ok := w.watch()
		if !ok {
			return v, ErrClosed
		}
		if v > offset {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return w.load(), ctx.Err()
		}
	}
}
