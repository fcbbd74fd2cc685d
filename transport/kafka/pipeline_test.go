package kafka

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests are started in arrival order, completed by the handler in
// reverse order, and answered in arrival order.
func TestServer_PipelinedAnsweredInOrder(t *testing.T) {
	const n = 8
	f := newFake()
	var mu sync.Mutex
	var futures []*Future
	f.serve = func(c *Conn, req *Request) Pending {
		fut := NewFuture()
		mu.Lock()
		futures = append(futures, fut)
		all := len(futures) == n
		mu.Unlock()
		if all {
			go func() { // complete last to first, from another goroutine
				for i := n - 1; i >= 0; i-- {
					futures[i].Complete(f.answer(f.requests()[i]), nil)
				}
			}()
		}
		return fut
	}
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())

	// Alternate a flexible and a non-flexible version so header v1 and v0
	// responses interleave in one pipeline.
	var reqs []kmsg.Request
	for i := range n {
		v := int16(12)
		if i%2 == 1 {
			v = 4
		}
		reqs = append(reqs, metadataReq(v, "t"+string(rune('a'+i))))
	}
	rc.send(100, reqs...)
	for i, req := range reqs {
		resp := rc.read(req, 100+int32(i)).(*kmsg.MetadataResponse)
		if got, want := *resp.Topics[0].Topic, "t"+string(rune('a'+i)); got != want {
			t.Errorf("response %d is for topic %s, want %s", i, got, want)
		}
	}
	for i, r := range f.requests() {
		if got, want := r.Header.CorrelationID, 100+int32(i); got != want {
			t.Errorf("Serve call %d had correlation id %d, want %d", i, got, want)
		}
	}
}

// Produce with acks=0 gets no response, immediately or deferred, while
// the requests around it are answered in order.
func TestServer_AcksZeroGetsNoResponse(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending {
		if p, ok := req.Body.(*kmsg.ProduceRequest); ok && p.Acks == 0 && req.Header.CorrelationID == 3 {
			fut := NewFuture() // deferred "no response"
			go fut.Complete(nil, nil)
			return fut
		}
		if resp := f.answer(req); resp != nil {
			return Ready(resp)
		}
		return NoResponse()
	}
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())

	produce1 := produceReq(9, 1, "a")
	meta := metadataReq(12, "a")
	rc.send(1, produceReq(9, 0, "a"), meta, produceReq(9, 0, "a"), produce1)
	rc.read(meta, 2)
	resp := rc.read(produce1, 4).(*kmsg.ProduceResponse)
	if got := len(resp.Topics[0].Partitions); got != 2 {
		t.Fatalf("produce response has %d partitions, want 2", got)
	}
	rc.ping(5) // and nothing else was written before it
	if got := ts.obs.Snapshot().Outcomes[OutcomeNoResponse]; got != 2 {
		t.Fatalf("%d requests without response, want 2", got)
	}
}

// At MaxInFlight unanswered requests the reader stops: Serve is not called
// for later frames until a response is written.
func TestServer_BackpressureStopsReading(t *testing.T) {
	const maxInFlight, n = 2, 5
	f := newFake()
	futures := make(chan *Future, n)
	f.serve = func(c *Conn, req *Request) Pending {
		fut := NewFuture()
		futures <- fut
		return fut
	}
	blocked := make(chan int, n)
	ts := startServerHooks(t, f, func(c *Config) { c.MaxInFlight = maxInFlight },
		testHooks{readerBlocked: func(*Conn) { blocked <- len(f.requests()) }})
	rc := dialRaw(t, ts.Addr())

	var reqs []kmsg.Request
	for range n {
		reqs = append(reqs, metadataReq(12))
	}
	rc.send(1, reqs...)
	select {
	case got := <-blocked:
		if got != maxInFlight {
			t.Fatalf("reader blocked after %d Serve calls, want %d", got, maxInFlight)
		}
	case <-time.After(hangGuard):
		t.Fatalf("reader never blocked; Serve called %d times", len(f.requests()))
	}
	for i := range n {
		fut := <-futures
		fut.Complete(f.answer(f.requests()[i]), nil)
		rc.read(reqs[i], 1+int32(i))
	}
	if got := len(f.requests()); got != n {
		t.Fatalf("%d requests served, want %d", got, n)
	}
}
