package coordinator

import "github.com/twmb/franz-go/pkg/kerr"

// controlledShutdown marks broker c.ID as shutting down and takes it out
// of every ISR, electing new leaders where it led, exactly as fencing
// does (fenceISR without lostData: a clean shutdown keeps the ELR), but
// while the broker still serves, so that its clients move before it
// stops and acks=all on the new leaders does not wait for it. The mark
// comes first, so that the elections already count it ineligible. It
// leaves raft partitions alone: the broker hands their leadership over
// itself, and leader balance stops handing it back (Broker.Eligible).
// A second one of the same start changes nothing.
func (s *State) controlledShutdown(c *ControlledShutdown) Result {
	b, ok := s.Brokers[c.ID]
	switch {
	case !ok:
		return Result{Err: cmdErr(kerr.BrokerNotAvailable, "broker %d is not registered", c.ID)}
	case b.StartID != c.StartID:
		return Result{Err: cmdErr(kerr.StaleBrokerEpoch, "broker %d has registered since: start %q, not %q", c.ID, b.StartID, c.StartID)}
	case b.ShuttingDown:
		return Result{}
	}
	nb := *b
	nb.ShuttingDown = true
	s.Brokers[c.ID] = &nb
	s.fenceISR(c.ID, false, false)
	return Result{}
}
