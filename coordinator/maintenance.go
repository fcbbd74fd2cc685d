package coordinator

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Maintenance mode (Redpanda's): an operator takes one broker's
// leaderships away while it keeps serving and replicating, to work on it
// without a failover. Group 0 holds the mark (Broker.InMaintenance), so
// every node agrees on it and it survives restarts. At apply, the ISR
// partitions the broker leads elect another ISR member where one may
// lead, and from then on every ISR election picks it only as the last
// clean choice (isr_elect.go); the broker stays in every ISR. Raft
// partitions and group 0 it leaves to the node, which hands their
// leadership over itself (broker's maintenance loop), and to leader
// balance, which hands it nothing back (Broker.TakesLeadership).

// setMaintenance turns broker m.ID's maintenance mode on or off. A second
// broker is refused while one is in maintenance, as Redpanda refuses it:
// two brokers shedding leadership at once can leave a partition whose
// replicas are all in maintenance. Turning it on or off twice changes
// nothing the second time.
func (s *State) setMaintenance(m *SetMaintenance) Result {
	b, ok := s.Brokers[m.ID]
	if !ok {
		return Result{Err: cmdErr(kerr.BrokerNotAvailable, "broker %d is not registered", m.ID)}
	}
	if other := s.InMaintenance(); m.On && other != 0 && other != m.ID {
		return Result{Err: cmdErr(kerr.InvalidRequest,
			"broker %d is in maintenance: only one broker may be in maintenance at a time; turn it off first", other)}
	}
	if b.InMaintenance == m.On {
		return Result{}
	}
	nb := *b
	nb.InMaintenance = m.On
	s.Brokers[m.ID] = &nb
	if m.On {
		s.electAwayFrom(m.ID)
	}
	return Result{}
}

// electAwayFrom re-runs the election of every ISR partition broker id
// leads, now that it is in maintenance: the election prefers any other
// ISR member that may lead, and keeps id only when there is none.
func (s *State) electAwayFrom(id uint64) {
	s.forEachISR(func(t *Topic, p Partition) (Partition, bool) {
		if p.Leader != id {
			return p, false
		}
		n := s.rules(t, 0).build(p, isrChange{})
		return n, !samePartition(p, n)
	})
}

// SetMaintenance proposes broker id's maintenance mode on or off and
// returns once it is applied here, or the command's refusal (an unknown
// broker, another one in maintenance). It refuses to propose while a
// registered broker runs a version that would not apply the command
// (Broker.SetMaintenance): its metadata, ISR leaders included, would
// diverge from the others'.
func (c *Controller) SetMaintenance(ctx context.Context, id uint64, on bool) error {
	st := c.cfg.Metadata.View()
	for _, bid := range st.BrokerIDs() {
		if !st.Brokers[bid].SetMaintenance {
			return cmdErr(kerr.UnsupportedVersion, "broker %d runs a version without maintenance mode; its metadata would diverge", bid)
		}
	}
	res, err := c.ProposeRetry(ctx, &Command{SetMaintenance: &SetMaintenance{ID: id, On: on}})
	if err != nil {
		return fmt.Errorf("maintenance of broker %d: %w", id, err)
	}
	return res.Err
}
