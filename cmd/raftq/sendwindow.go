package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sendWindow bounds how long a producing command (produce, bench) waits
// for its records' answers. kgo retries a record until the cluster answers
// it, and Produce itself blocks while the client's buffer is full, so a
// command whose cluster stopped answering would wait for ever. Records are
// produced with the window's context, which ends --drain-timeout after the
// sending does (the end of the run or of the input, or Ctrl-C): records
// still waiting for buffer space or not yet sent then fail with
// context.Canceled, and closing the client fails those in flight with
// kgo.ErrClientClosed. Both count as unanswered: whether they were written
// is unknown.
type sendWindow struct {
	ctx     context.Context
	cancel  context.CancelFunc
	drain   time.Duration
	ended   sync.Once
	unwatch func() bool
	pending sync.WaitGroup
}

func newSendWindow(sending context.Context, drain time.Duration) *sendWindow {
	w := &sendWindow{drain: drain}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.unwatch = context.AfterFunc(sending, w.sendingEnded)
	return w
}

// sendingEnded starts the drain: it closes the window drain from now.
func (w *sendWindow) sendingEnded() {
	w.ended.Do(func() { time.AfterFunc(w.drain, w.cancel) })
}

// produce sends r; answered runs once with its outcome.
func (w *sendWindow) produce(cl *kgo.Client, r *kgo.Record, answered func(error)) {
	w.pending.Add(1)
	cl.Produce(w.ctx, r, func(_ *kgo.Record, err error) {
		answered(err)
		w.pending.Done()
	})
}

// close ends the sending and waits for the answers until the window
// closes, calling waiting with the number still outstanding if they take
// more than a second; then it closes cl and returns once every record's
// outcome has been reported.
func (w *sendWindow) close(cl *kgo.Client, waiting func(n int64, d time.Duration)) {
	w.unwatch()
	w.sendingEnded()
	soon, cancel := context.WithTimeout(w.ctx, time.Second)
	if cl.Flush(soon) != nil && w.ctx.Err() == nil {
		waiting(cl.BufferedProduceRecords(), w.drain)
		_ = cl.Flush(w.ctx)
	}
	cancel()
	cl.Close()
	w.pending.Wait()
	w.cancel()
}

// unanswered reports whether a record's error means the window closed
// before the cluster answered it.
func unanswered(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
}
