package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// flushBytes is how much encoded output the writer gathers before a
	// write while more responses are ready.
	flushBytes = 64 << 10
	// maxKeptBuffer: an output buffer grown past this (a big fetch) is
	// dropped after the write instead of being kept for the connection's
	// life.
	maxKeptBuffer = 4 << 20
)

// respWriter is the writer goroutine's state: responses encoded but not
// yet written, and the requests they answer.
type respWriter struct {
	c     *Conn
	out   []byte
	batch []item
}

// writeLoop writes responses in request order until the queue is closed
// and drained (nil) or the connection fails (the error).
func (c *Conn) writeLoop() error {
	w := &respWriter{c: c}
	err := w.run()
	w.failBatch()
	return err
}

func (w *respWriter) run() error {
	for {
		it, ok, err := w.next()
		if err != nil {
			return err
		}
		if !ok {
			return w.flush()
		}
		if err := w.handle(it); err != nil {
			// Earlier responses still go out before the connection
			// closes; a flush error here only repeats the failure.
			_ = w.flush()
			w.batch = append(w.batch, it)
			return err
		}
		if len(w.out) >= flushBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
}

// next returns the next request, writing out what is buffered before it
// blocks.
func (w *respWriter) next() (item, bool, error) {
	select {
	case it, ok := <-w.c.queue:
		return it, ok, nil
	default:
	}
	if err := w.flush(); err != nil {
		return item{}, false, err
	}
	select {
	case it, ok := <-w.c.queue:
		return it, ok, nil
	case <-w.c.ctx.Done():
		return item{}, false, context.Cause(w.c.ctx)
	}
}

// handle waits for it's outcome and encodes its response, if any. On error
// it has not added it to the batch.
func (w *respWriter) handle(it item) error {
	if err := w.await(it.pending); err != nil {
		return err
	}
	resp, err := it.pending.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%s v%d correlation id %d: %w", kmsg.NameForKey(it.key), it.version, it.corr, err)
	case resp == nil:
		it.outcome = OutcomeNoResponse
		w.batch = append(w.batch, it)
		return nil
	}
	if err := checkResponse(it, resp); err != nil && !it.raw {
		return err
	}
	start := len(w.out)
	if it.raw {
		w.out = append(w.out, 0, 0, 0, 0)
	} else {
		w.out = appendResponseHeader(w.out, it.corr, it.flexible)
	}
	w.out = resp.AppendTo(w.out)
	if err := patchSize(w.out[start:], len(w.out)-start-4); err != nil {
		w.out = w.out[:start]
		return err
	}
	w.batch = append(w.batch, it)
	return nil
}

// await waits for p, first writing out what is buffered if p is not ready:
// earlier responses must not wait behind a slow one.
func (w *respWriter) await(p Pending) error {
	select {
	case <-p.Done():
		return nil
	default:
	}
	if err := w.flush(); err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-w.c.ctx.Done():
		return context.Cause(w.c.ctx)
	}
}

// flush writes the buffer and reports the requests it answered; on error
// they stay in the batch for failBatch.
func (w *respWriter) flush() error {
	if len(w.out) > 0 {
		w.c.armWrite()
		if _, err := w.c.nc.Write(w.out); err != nil {
			return fmt.Errorf("write responses: %w", err)
		}
		if cap(w.out) > maxKeptBuffer {
			w.out = nil
		} else {
			w.out = w.out[:0]
		}
	}
	now := time.Now()
	for _, it := range w.batch {
		w.c.srv.obs.RequestDone(w.c, it.key, it.version, it.outcome, now.Sub(it.received))
		w.c.release()
	}
	w.batch = w.batch[:0]
	return nil
}

// failBatch reports buffered requests whose responses will never be
// written.
func (w *respWriter) failBatch() {
	for _, it := range w.batch {
		w.c.srv.obs.RequestDone(w.c, it.key, it.version, OutcomeFailed, time.Since(it.received))
	}
	w.batch = nil
}

func checkResponse(it item, resp kmsg.Response) error {
	if resp.Key() != it.key || resp.GetVersion() != it.respVersion {
		return fmt.Errorf("%w: %s v%d answered by %s v%d", ErrBadResponse,
			kmsg.NameForKey(it.key), it.respVersion, kmsg.NameForKey(resp.Key()), resp.GetVersion())
	}
	return nil
}

// patchSize writes size into frame's 4-byte prefix.
func patchSize(frame []byte, size int) error {
	if size > math.MaxInt32 {
		return fmt.Errorf("%w: response of %d bytes", ErrBadResponse, size)
	}
	binary.BigEndian.PutUint32(frame, uint32(size))
	return nil
}

// armWrite sets the write deadline for the next write (coarsely, see
// closeEnough). Writer goroutine only.
func (c *Conn) armWrite() {
	d := c.srv.cfg.WriteTimeout
	if next := deadline(d); !closeEnough(c.writeDeadline, next, d) {
		c.nc.SetWriteDeadline(next)
		c.writeDeadline = next
	}
}
