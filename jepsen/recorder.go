package jepsen

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"time"
)

// Recorder appends operations to a history from many goroutines at once.
// It stamps each op with its index and the monotonic time since the
// recorder was made, under one lock, so indexes and times agree with the
// order of the history. When given a writer it also streams every op as a
// JSON line, so a run that dies still leaves its history behind.
type Recorder struct {
	start time.Time

	mu  sync.Mutex
	ops History
	w   *bufio.Writer
	err error // first write error; later ops are still kept in memory
}

// NewRecorder starts the clock. w may be nil.
func NewRecorder(w io.Writer) *Recorder {
	r := &Recorder{start: time.Now()}
	if w != nil {
		r.w = bufio.NewWriterSize(w, 1<<16)
	}
	return r
}

// Record stamps op with its index and time, appends it and returns the
// stamped copy.
func (r *Recorder) Record(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.ops))
	op.Time = int64(time.Since(r.start))
	r.ops = append(r.ops, op)
	if r.w != nil && r.err == nil {
		r.err = writeOp(r.w, &op)
	}
	return op
}

// Invoke records op as an invocation.
func (r *Recorder) Invoke(op Op) Op {
	op.Type = Invoke
	return r.Record(op)
}

// Complete records c, a completion made with Op.Completion.
func (r *Recorder) Complete(c Op) Op {
	if c.Type == Invoke {
		panic("jepsen: Complete with an invoke op")
	}
	return r.Record(c)
}

// Began returns when the recorder's clock started: time 0 of the history.
func (r *Recorder) Began() time.Time { return r.start }

// Now returns the history clock's time: nanoseconds since Began, the
// time an op recorded now would be stamped with.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// History returns a copy of the ops recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(History(nil), r.ops...)
}

// Flush writes buffered lines out and returns the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	if r.err == nil {
		if err := r.w.Flush(); err != nil {
			r.err = fmt.Errorf("flush history: %w", err)
		}
	}
	return r.err
}
