package main

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrips times the bench's answered Produce requests as kgo sees
// them (kgo.HookBrokerE2E): from the first byte written to the last byte
// of the response read. Beside the records' latencies it bounds the
// broker's share: a record also waits for its batch to linger and for a
// request slot (five per broker when idempotent, answered in order). The
// bound is loose in one way: the span includes the connection's reader
// goroutine getting to the response, so a client stall while a request
// is in flight counts here too.
type roundTrips struct {
	start time.Time // requests written before it (the warm-up) are left out
	mu    sync.Mutex
	ns    blocks[int64]
}

var _ kgo.HookBrokerE2E = (*roundTrips)(nil)

func (r *roundTrips) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	// With acks=0 kgo reports the write alone (nothing is read): no round trip.
	if key != int16(kmsg.Produce) || e.Err() != nil || e.BytesRead == 0 {
		return
	}
	d := e.DurationE2E()
	if time.Now().Add(-d).Before(r.start) {
		return
	}
	r.mu.Lock()
	r.ns.add(int64(d))
	r.mu.Unlock()
}

// fill sets the request figures of res.
func (r *roundTrips) fill(res *benchResult) {
	r.mu.Lock()
	ns := sortedValues(&r.ns, func(v int64) int64 { return v })
	r.mu.Unlock()
	res.Requests = int64(len(ns))
	res.RequestP50ms = percentile(ns, 0.50)
	res.RequestP99ms = percentile(ns, 0.99)
	res.RequestMaxMs = percentile(ns, 1)
}
