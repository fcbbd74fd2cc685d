package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// A node's part in its own drain before it stops (broker's Node.Drain):
// the ControlledShutdown proposal, which moves its ISR leaderships and
// takes it out of every ISR, and, last, the hand-over of group 0's
// leadership.

// ControlledShutdown proposes this broker's controlled shutdown for the
// process start that Start registered, retrying until ctx ends, and
// returns once it is applied here: the new ISR leaders are then in this
// node's metadata, for reconcile to pass on to its replicas. A start
// that this node's metadata does not show registered (a node refused
// by its peers, say) leads and is in nothing, and is not waited for; a
// cluster with a broker of an older version, which would not apply the
// command (Broker.ControlledShutdown), is not sent it.
func (c *Controller) ControlledShutdown(ctx context.Context) error {
	if !c.Registered() {
		return fmt.Errorf("coordinator: this start of broker %d is not registered: nothing to shut down", c.self.ID)
	}
	st := c.cfg.Metadata.View()
	for _, id := range st.BrokerIDs() {
		if !st.Brokers[id].ControlledShutdown {
			return fmt.Errorf("coordinator: broker %d runs a version without controlled shutdown; its metadata would diverge", id)
		}
	}
	cmd := &Command{ControlledShutdown: &ControlledShutdown{ID: c.self.ID, StartID: c.self.StartID}}
	res, err := c.ProposeRetry(ctx, cmd)
	if err != nil {
		return err
	}
	return res.Err
}

// Registered reports whether this node's metadata holds the
// registration of this process start (Start's StartID). Until it does,
// the metadata may be a replay of the log from before the start, in
// which this broker led partitions that group 0 has since given to
// others.
func (c *Controller) Registered() bool { return c.RegisteredIn(c.cfg.Metadata.View()) }

// RegisteredIn is Registered for the metadata state s.
func (c *Controller) RegisteredIn(s *State) bool {
	b, ok := s.Brokers[c.self.ID]
	return ok && c.self.StartID != "" && b.StartID == c.self.StartID
}

// HandOffMetadata moves group 0's leadership, if this node holds it, to
// the voter that eligible accepts and whose log holds the most
// (raftgroup.Group.Successor), one not in maintenance if there is one,
// and waits until it leads or ctx ends. It returns the new leader, or 0
// when this node did not lead group 0 or is its only voter. The drain
// calls it after its other moves: the proposals they made were this
// leader's to commit. A node in maintenance calls it whenever it leads
// group 0.
func (c *Controller) HandOffMetadata(ctx context.Context, eligible func(id uint64) bool) (uint64, error) {
	st := c.group.Status()
	if !st.IsLeader() || len(st.Voters) < 2 {
		return 0, nil
	}
	candidates := slices.DeleteFunc(slices.Clone(st.Voters), func(id uint64) bool { return !eligible(id) })
	maintenance := c.cfg.Metadata.View().InMaintenance()
	to := c.group.Successor(slices.DeleteFunc(slices.Clone(candidates), func(id uint64) bool { return id == maintenance }))
	if to == 0 {
		to = c.group.Successor(candidates)
	}
	if to == 0 {
		return 0, errNoSuccessor
	}
	return to, c.group.TransferLeadership(ctx, to)
}

// errNoSuccessor: no other voter of group 0 is eligible to lead it.
var errNoSuccessor = errors.New("coordinator: no other eligible voter to hand the metadata leadership to")
