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
	cl      *kgo.Client
	waiting func(left time.Duration) // the note, a second into the drain
	ended   sync.Once
	unwatch func() bool
	pending sync.WaitGroup
}

// newSendWindow opens a window for cl's records that closes drain after
// sending ends; if answers are still outstanding a second after that,
// waiting is told how long the drain has left.
func newSendWindow(sending context.Context, drain time.Duration, cl *kgo.Client, waiting func(left time.Duration)) *sendWindow {
	w := &sendWindow{drain: drain, cl: cl, waiting: waiting}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.unwatch = context.AfterFunc(sending, w.sendingEnded)
	return w
}

// sendingEnded starts the drain: it closes the window drain from now.
func (w *sendWindow) sendingEnded() {
	w.ended.Do(func() {
		deadline := time.Now().Add(w.drain)
		time.AfterFunc(w.drain, w.cancel)
		time.AfterFunc(time.Second, func() {
			if w.ctx.Err() == nil && w.cl.BufferedProduceRecords() > 0 {
				w.waiting(time.Until(deadline))
			}
		})
	})
}

// produce sends r; answered runs once with its outcome.
func (w *sendWindow) produce(r *kgo.Record, answered func(error)) {
	w.pending.Add(1)
	w.cl.Produce(w.ctx, r, func(_ *kgo.Record, err error) {
		answered(err)
		w.pending.Done()
	})
}

// close ends the sending and waits for the answers until the window
// closes; then it closes the client and returns once every record's
// outcome has been reported.
func (w *sendWindow) close() {
	w.unwatch()
	w.sendingEnded()
	_ = w.cl.Flush(w.ctx)
	w.cl.Close()
	w.pending.Wait()
	w.cancel()
}

// unanswered reports whether a record's error means the window closed
// before the cluster answered it.
func unanswered(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
}
