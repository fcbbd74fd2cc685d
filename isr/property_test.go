package isr

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
)

// model is a random world around one leader: followers whose true LEO
// grows as they fetch, a group 0 that applies proposals by
// compare-and-set, sometimes refuses them, and publishes its state.
type model struct {
	t        *testing.T
	r        *rand.Rand
	h        *harness
	now      time.Time
	followLE map[uint64]int64 // each follower's true LEO
	isr      []uint64         // group 0's
	pe       int32            // group 0's partition epoch
}

func (m *model) step() {
	switch m.r.IntN(6) {
	case 0:
		m.h.setHW(m.h.l.appended(m.h.l.leo+int64(m.r.IntN(5)), m.now))
	case 1:
		m.fetch()
	case 2:
		m.now = m.now.Add(time.Duration(m.r.IntN(20_000)) * time.Millisecond)
		m.h.l.maybeShrink(m.now)
	case 3:
		m.answer()
	case 4:
		m.publish()
	case 5:
		m.fetch()
	}
	m.check()
}

// fetch lets a random follower copy some of the leader's log and fetch.
func (m *model) fetch() {
	id := uint64(2 + m.r.IntN(len(m.followLE)))
	leo := m.followLE[id]
	leo += int64(m.r.IntN(int(m.h.l.leo-leo) + 1))
	m.followLE[id] = leo
	m.h.fetch(id, leo, m.now)
}

// answer applies the oldest proposal as group 0 would, or refuses it.
func (m *model) answer() {
	if len(m.h.c.waiting) == 0 {
		return
	}
	it := m.h.c.sent[len(m.h.c.sent)-len(m.h.c.waiting)]
	switch {
	case it.PartitionEpoch != m.pe:
		m.h.setHW(m.h.c.fail(m.h.l, kerr.InvalidUpdateVersion, m.now))
	case m.r.IntN(4) == 0:
		m.h.setHW(m.h.c.fail(m.h.l, kerr.IneligibleReplica, m.now))
	case m.r.IntN(6) == 0:
		m.h.setHW(m.h.c.fail(m.h.l, kerr.RequestTimedOut, m.now))
	default:
		m.isr = nil
		for _, mem := range it.ISR {
			m.isr = append(m.isr, mem.ID)
		}
		m.pe++
		p := coordinator.Partition{Leader: 1, LeaderTerm: 5, ISR: m.isr, PartitionEpoch: m.pe}
		m.h.setHW(m.h.c.answer(m.h.l, coordinator.ItemResult{Group: 7, Partition: p}, m.now))
	}
}

// publish delivers group 0's state as a metadata update; an answer still
// in flight is then never read, as the owner stops selecting on it.
func (m *model) publish() {
	m.h.setHW(m.h.l.updateMetadata(Term{LeaderEpoch: 5, PartitionEpoch: m.pe, Replicas: m.h.l.replicas, ISR: m.isr, MinISR: m.h.l.minISR, BrokerEpoch: 100}, m.now))
	m.h.c.waiting = nil
}

// check asserts the invariants of doc.go (setHW already checks that the
// HW never moves back).
func (m *model) check() {
	l := m.h.l
	if l.hw > l.leo {
		m.t.Fatalf("HW %d past the leader's LEO %d", l.hw, l.leo)
	}
	for _, id := range l.isr {
		if id != 1 && m.followLE[id] < l.hw {
			m.t.Fatalf("HW %d past ISR member %d's LEO %d (ISR %v)", l.hw, id, m.followLE[id], l.isr)
		}
	}
	if !slices.Contains(l.isr, 1) {
		m.t.Fatalf("leader's ISR %v lost the leader", l.isr)
	}
	if len(m.h.c.waiting) > 1 {
		m.t.Fatalf("%d AlterPartitions in flight", len(m.h.c.waiting))
	}
}

// TestLeader_RandomHistories: over random fetch, append, tick, answer and
// metadata sequences the HW never moves back, never passes the leader's
// LEO or any committed ISR member's LEO, rises only while the ISR meets
// min.insync.replicas, and at most one AlterPartition is in flight (the
// fake controller fails the test on a second).
func TestLeader_RandomHistories(t *testing.T) {
	var rises int
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, seed*7919))
		rf := 2 + r.IntN(4)
		replicas := make([]uint64, rf)
		for i := range replicas {
			replicas[i] = uint64(i + 1)
		}
		minISR := 1 + r.IntN(rf)
		leo := int64(r.IntN(20))
		h := newHarness(t, replicas, replicas, minISR, leo, nil)
		m := &model{t: t, r: r, h: h, now: t0, followLE: map[uint64]int64{}, isr: replicas, pe: 1}
		for _, id := range replicas[1:] {
			m.followLE[id] = leo // a fresh ISR holds the leader's log
		}
		for range 400 {
			before := h.hw
			under := h.l.underMinISR()
			m.step()
			if under && h.l.underMinISR() && h.hw != before {
				t.Fatalf("seed %d: HW rose from %d to %d with ISR %v below min %d", seed, before, h.hw, h.l.isr, minISR)
			}
			if h.hw > before {
				rises++
			}
		}
	}
	if rises < 1000 {
		t.Fatalf("the HW rose only %d times: the histories test little", rises)
	}
}
