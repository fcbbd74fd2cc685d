package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Future is a Pending completed later from any goroutine: Serve returns it
// and the goroutine doing the work calls Complete.
type Future struct {
	once sync.Once
	done chan struct{}
	resp kmsg.Response
	err  error
}

var _ Pending = (*Future)(nil)

// NewFuture returns an incomplete Future.
func NewFuture() *Future { return &Future{done: make(chan struct{})} }

// Complete sets the outcome (see Pending.Result for what nil means). Only
// the first call counts; it reports whether this call was that one.
func (f *Future) Complete(resp kmsg.Response, err error) bool {
	first := false
	f.once.Do(func() {
		f.resp, f.err = resp, err
		close(f.done)
		first = true
	})
	return first
}

// Done is closed once Complete has been called.
func (f *Future) Done() <-chan struct{} { return f.done }

// Result returns what Complete set. Call it only after Done is closed.
func (f *Future) Result() (kmsg.Response, error) {
	<-f.done
	return f.resp, f.err
}
