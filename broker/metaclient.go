package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/raftgroup"
)

// proposeMeta proposes c to the metadata group (forwarded to its leader
// if need be) and waits until it is applied on this node, so that the
// caller's next read of the metadata sees it.
func (n *Node) proposeMeta(ctx context.Context, c *coordinator.Command) (coordinator.Result, error) {
	data, err := c.Encode()
	if err != nil {
		return coordinator.Result{}, err
	}
	p, err := n.group.Propose(ctx, data)
	if err != nil {
		return coordinator.Result{}, err
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return coordinator.Result{}, err
	}
	r, ok := res.Value.(coordinator.Result)
	if !ok {
		return coordinator.Result{}, fmt.Errorf("metadata entry %d applied with %T", res.Index, res.Value)
	}
	return r, nil
}

// proposeMetaRetry retries proposeMeta while the metadata group has no
// leader or loses the proposal, until ctx ends. A command's own failure
// (Result.Err) is returned, not retried.
func (n *Node) proposeMetaRetry(ctx context.Context, c *coordinator.Command) (coordinator.Result, error) {
	backoff := 50 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := n.proposeMeta(attempt, c)
		cancel()
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		n.log.Debug("metadata proposal retry", "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// metaKafkaError maps a failed metadata proposal to the Kafka error a
// client should see.
func metaKafkaError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftgroup.ErrNotLeader), errors.Is(err, raftgroup.ErrProposalDropped),
		errors.Is(err, raftgroup.ErrProposalLost), errors.Is(err, raftgroup.ErrOutcomeUnknown):
		return kerr.NotController
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return err
}
