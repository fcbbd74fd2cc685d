package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/raftgroup"
)

// ErrNoController means a metadata proposal found no group-0 leader to
// take it, or lost it to a leader change; retry later (Kafka's
// NOT_CONTROLLER).
var ErrNoController = errors.New("coordinator: no metadata leader took the proposal")

// LocalReplica is what the controller needs of a partition replica this
// node hosts: its group, who leads it, and a way to move its leadership.
type LocalReplica interface {
	Group() uint64
	// LeaderTerm reports whether this node leads the partition, and in
	// which term (leader epoch).
	LeaderTerm() (leader bool, term uint64)
	TransferLeadership(ctx context.Context, to uint64) error
}

// ControllerConfig configures a node's Controller.
type ControllerConfig struct {
	NodeID uint64
	Host   *raftgroup.Host
	// Metadata is the state machine group 0 applies to.
	Metadata *Metadata
	// Nodes is every node of the initial cluster; the first 1, 3 or 5
	// (Voters) bootstrap group 0 as its voters and the metadata leader
	// adds the others, and every node admitted later (State.Admitted), as
	// learners.
	Nodes []uint64
	// MetadataVoters is how many voters group 0 keeps (1, 3 or 5; 0:
	// DefaultMetadataVoters), as many as there are nodes, rounded down to
	// odd. The metadata leader promotes caught-up learners, replaces
	// voters dead for VoterReplaceAfter and shrinks to it from the
	// bootstrap's Voters (controller_voters.go). It does not change the
	// bootstrap: nodes that bootstrapped different voters would each
	// hold different committed entries at the same indexes. As metadata
	// leader the node uses its own, so give every node the same.
	MetadataVoters int
	// VoterReplaceAfter is how long a voter must have been dead before
	// the metadata leader replaces it with a live learner (0: never).
	VoterReplaceAfter time.Duration
	// HasPeer, if set, reports whether the node's transport knows node
	// id's address: the metadata leader adds a learner only once it does.
	HasPeer func(id uint64) bool
	// DeadAfter is how long the metadata leader must not hear from a
	// broker before it marks it dead.
	DeadAfter time.Duration
	// LeaderBalanceInterval is how often leadership goes back to
	// preferred replicas (0: never).
	LeaderBalanceInterval time.Duration
	// EligibleLeaderReplicas is the node's KIP-966 flag: as metadata
	// leader, the node proposes it to group 0 whenever the cluster's
	// feature differs (the metadata leader's flag wins).
	EligibleLeaderReplicas bool
	// TopicDefaults are the node's topic config defaults, from its broker
	// configs (ResolveTopicDefaults): as metadata leader, the node
	// proposes them to group 0 whenever the cluster's differ (the
	// metadata leader's win).
	TopicDefaults TopicDefaults
	// Connected reports whether this node hears from node id now.
	Connected func(id uint64) bool
	// LastHeard, if set, is when the node last heard from broker id (zero:
	// never), also after the connection was lost. The metadata leader
	// counts a broker silent since then whether or not it is connected: a
	// paused process keeps its connections open and sends nothing, and a
	// new metadata leader notices the old one's death no later than any
	// other node's, not an election later.
	LastHeard func(id uint64) time.Time
	// PartitionBalancer has the metadata leader move replicas and
	// preferred leaderships until every eligible broker holds about as
	// many as the others (balance.go).
	PartitionBalancer bool
	// Local lists the partition replicas this node hosts.
	Local func() []LocalReplica
	// Reconcile brings the node's replicas to a metadata state. The
	// controller calls it on every metadata change, and every
	// ReconcileInterval to retry what failed.
	Reconcile         func(*State)
	ReconcileInterval time.Duration
	Logger            *slog.Logger
}

// Voters returns the ids that vote in group 0: the first 1, 3 or 5 of
// nodes in order.
func Voters(nodes []uint64) []uint64 {
	ids := slices.Sorted(slices.Values(nodes))
	n := min(len(ids), 5)
	if n%2 == 0 {
		n--
	}
	return ids[:max(n, 0)]
}

// Controller is a node's part in the control plane: it runs group 0 on
// the node's host and the loops that act on the metadata (registration,
// reconcile, leadership hints, the metadata leader's learners and broker
// liveness, leader balance). Close stops every loop it started and waits
// for them.
type Controller struct {
	cfg   ControllerConfig
	log   *slog.Logger
	group *raftgroup.Group
	self  Broker // as Start registered it

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// replayTo is group 0's last log index when it opened: the states
	// published before it is applied are replayed history (reconcileLoop).
	// Not the commit index, which raft does not fsync on its own: a node
	// may have applied (and acted on) entries past the commit it saved.
	replayTo uint64
}

// NewController opens group 0: the voters bootstrap it; any other node
// joins it empty and is added as a learner by the metadata leader. The
// loops start with Start.
func NewController(cfg ControllerConfig) (*Controller, error) {
	// The metadata log is fsynced whatever --fsync says (raftgroup.GroupConfig.AlwaysFsync).
	gc := raftgroup.GroupConfig{ID: MetadataGroup, StateMachine: cfg.Metadata, ForwardProposals: true, AlwaysFsync: true}
	if voters := Voters(cfg.Nodes); slices.Contains(voters, cfg.NodeID) {
		gc.Peers = voters
	} else {
		gc.Join = true
	}
	g, err := cfg.Host.CreateGroup(gc)
	if err != nil {
		return nil, fmt.Errorf("metadata group: %w", err)
	}
	c := &Controller{cfg: cfg, log: logging.Discard(cfg.Logger), group: g, replayTo: g.Status().LastIndex}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Start starts the loops, registering self as this node's broker.
// self.StartID should be new with each process start (NewStartID).
func (c *Controller) Start(self Broker) {
	c.self = self
	c.goLoop("register", func(ctx context.Context) { c.registerLoop(ctx, self) })
	c.goLoop("reconcile", c.reconcileLoop)
	c.goLoop("leader-hints", c.hintLoop)
	c.goLoop("metadata-leader", c.metadataLeaderLoop)
	c.goLoop("moves", c.moveLoop)
	if c.cfg.LeaderBalanceInterval > 0 {
		c.goLoop("leader-balance", c.leaderBalanceLoop)
	}
}

// NewStartID returns a random name for one start of a broker's process
// (Broker.StartID), from crypto/rand so that the simulator's seeded
// randomness makes it deterministic.
func NewStartID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Close stops the loops and waits for them. Group 0 itself closes with
// the host.
func (c *Controller) Close() {
	c.cancel()
	c.wg.Wait()
}

func (c *Controller) goLoop(name string, fn func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
		c.log.Debug("loop stopped", "loop", name)
	}()
}

// Status is group 0's status on this node.
func (c *Controller) Status() raftgroup.Status { return c.group.Status() }

// Leader returns the metadata leader (0: none known).
func (c *Controller) Leader() uint64 { return c.group.Status().Leader }

// Propose proposes cmd to group 0 (forwarded to its leader if need be)
// and waits until it is applied on this node, so that the caller's next
// read of the metadata sees it. A command that fails returns its error
// in Result.Err; a proposal that found no leader fails with
// ErrNoController.
func (c *Controller) Propose(ctx context.Context, cmd *Command) (Result, error) {
	data, err := cmd.Encode()
	if err != nil {
		return Result{}, err
	}
	p, err := c.group.Propose(ctx, data)
	if err != nil {
		return Result{}, classify(err)
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return Result{}, classify(err)
	}
	r, ok := res.Value.(Result)
	if !ok {
		return Result{}, fmt.Errorf("metadata entry %d applied with %T", res.Index, res.Value)
	}
	return r, nil
}

// ProposeRetry retries Propose while the metadata group has no leader or
// loses the proposal, until ctx ends. A command's own failure
// (Result.Err) is returned, not retried.
func (c *Controller) ProposeRetry(ctx context.Context, cmd *Command) (Result, error) {
	backoff := 50 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := c.Propose(attempt, cmd)
		cancel()
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		c.log.Debug("metadata proposal retry", "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// classify marks the raftgroup failures that mean "no leader took it".
func classify(err error) error {
	if errors.Is(err, raftgroup.ErrNotLeader) || errors.Is(err, raftgroup.ErrProposalDropped) ||
		errors.Is(err, raftgroup.ErrProposalLost) || errors.Is(err, raftgroup.ErrOutcomeUnknown) {
		return fmt.Errorf("%w: %w", ErrNoController, err)
	}
	return err
}
