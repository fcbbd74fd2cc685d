package main

import (
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrips times the bench's Produce requests from the first byte
// written to the last byte of the response read, as kgo sees them
// (kgo.HookBrokerE2E). Set beside the records' latencies, they tell the
// broker's share from the client's: a record also waits for its batch to
// linger, for a request slot (five per broker when idempotent), and for
// the client's own scheduler and collector.
type roundTrips struct {
	start time.Time // requests written before it (the warm-up) are left out
	mu    sync.Mutex
	ns    []int64
}

var _ kgo.HookBrokerE2E = (*roundTrips)(nil)

func (r *roundTrips) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != int16(kmsg.Produce) || e.Err() != nil {
		return
	}
	if time.Now().Add(-e.DurationE2E()).Before(r.start) {
		return
	}
	r.mu.Lock()
	r.ns = append(r.ns, int64(e.DurationE2E()))
	r.mu.Unlock()
}

// fill sets the request figures of res.
func (r *roundTrips) fill(res *benchResult) {
	r.mu.Lock()
	ns := slices.Clone(r.ns)
	r.mu.Unlock()
	slices.Sort(ns)
	res.Requests = int64(len(ns))
	res.RequestP50ms = percentile(ns, 0.50)
	res.RequestP99ms = percentile(ns, 0.99)
	res.RequestMaxMs = percentile(ns, 1)
}
