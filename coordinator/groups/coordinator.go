package groups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/logging"
)

// Config configures the Coordinator of one offsets partition.
type Config struct {
	// Partition is the offsets partition's index (for logs).
	Partition int32
	// Machine is the partition's replicated state.
	Machine *Machine
	// Propose proposes an encoded Command to the partition's raft group
	// and waits until it is applied here, returning what Machine.Apply
	// returned. Required.
	Propose func(ctx context.Context, data []byte) (any, error)
	// Now is the coordinator's clock (default time.Now). Its readings go
	// into commands as NowMs; apply never reads a clock.
	Now func() time.Time

	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (Kafka's group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration
	// MaxMetadataBytes bounds a member's protocol metadata in JoinGroup
	// and each assignment in SyncGroup: larger ones get MESSAGE_TOO_LARGE.
	MaxMetadataBytes int
	// OffsetsRetention is how long the offsets of an empty group are kept
	// (offsets.retention.minutes); ExpireInterval is how often the leader
	// looks for expired ones.
	OffsetsRetention time.Duration
	ExpireInterval   time.Duration
	// ProposeTimeout bounds each proposal's wait.
	ProposeTimeout time.Duration

	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		Now:                   time.Now,
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second,
		MaxMetadataBytes:      1 << 20,
		OffsetsRetention:      7 * 24 * time.Hour,
		ExpireInterval:        10 * time.Minute,
		ProposeTimeout:        10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.Machine == nil || c.Propose == nil:
		return errors.New("groups: Machine and Propose are required")
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("groups: session timeout bounds %s..%s", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.InitialRebalanceDelay < 0:
		return errors.New("groups: negative initial rebalance delay")
	case c.MaxMetadataBytes <= 0:
		return errors.New("groups: max metadata bytes must be positive")
	case c.OffsetsRetention <= 0 || c.ExpireInterval <= 0:
		return errors.New("groups: offsets retention and expire interval must be positive")
	case c.ProposeTimeout <= 0:
		return errors.New("groups: propose timeout must be positive")
	}
	return nil
}

// Coordinator runs the classic group protocol for the groups of one
// offsets partition while this node leads it. Its soft state (heartbeat
// deadlines, members waiting in JoinGroup or SyncGroup, member ids handed
// out with MEMBER_ID_REQUIRED) lives only here; everything that must
// survive a failover is proposed to the partition's raft group first and
// read back from the Machine.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex // guards active, term, sessions, lastExpire; a leaf
	active     bool
	term       uint64
	sessions   map[string]*session
	lastExpire time.Time
}

// NewCoordinator returns an inactive coordinator.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Coordinator{cfg: cfg, log: logging.Discard(cfg.Logger).With("offsets_partition", cfg.Partition)}, nil
}

// Machine returns the partition's state machine.
func (c *Coordinator) Machine() *Machine { return c.cfg.Machine }

// Active reports whether the coordinator serves, and for which term.
func (c *Coordinator) Active() (bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active, c.term
}

// Activate makes this node the coordinator for term: it proposes a
// barrier (so that every entry of earlier terms is applied), then builds
// fresh soft state: every member of every group gets a full session
// timeout from now, and unfinished rebalances restart their clocks.
func (c *Coordinator) Activate(ctx context.Context, term uint64) error {
	if _, err := c.propose(ctx, &Command{Barrier: &Barrier{Term: term}}); err != nil {
		return fmt.Errorf("offsets partition %d: barrier: %w", c.cfg.Partition, err)
	}
	now := c.cfg.Now()
	sessions := map[string]*session{}
	for _, g := range c.cfg.Machine.Groups() {
		if len(g.Members) > 0 {
			sessions[g.Name] = loadSession(g, now)
		}
	}
	loaded := len(sessions) // sessions is shared once published
	c.mu.Lock()
	c.active, c.term, c.sessions, c.lastExpire = true, term, sessions, now
	c.mu.Unlock()
	c.log.Info("group coordinator active", "term", term, "groups", loaded)
	return nil
}

// Deactivate stops serving: requests waiting in JoinGroup or SyncGroup get
// NOT_COORDINATOR, and the soft state is dropped.
func (c *Coordinator) Deactivate() {
	c.mu.Lock()
	was, sessions := c.active, c.sessions
	c.active, c.sessions = false, nil
	c.mu.Unlock()
	if !was {
		return
	}
	for _, s := range sessions {
		s.mu.Lock()
		s.dead = true
		s.failWaiters(kerr.NotCoordinator.Code)
		s.mu.Unlock()
	}
	c.log.Info("group coordinator inactive")
}

// session returns the soft state of group name, creating it when create
// is set. The code is NOT_COORDINATOR when inactive.
func (c *Coordinator) session(name string, create bool) (*session, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return nil, kerr.NotCoordinator.Code
	}
	s := c.sessions[name]
	if s == nil && create {
		s = newSession(name)
		c.sessions[name] = s
	}
	return s, 0
}

func (c *Coordinator) forget(name string, s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[name] == s {
		delete(c.sessions, name)
	}
}

func (c *Coordinator) sessionList() []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		out = append(out, s)
	}
	return out
}

// Check returns 0 when the coordinator serves, else NOT_COORDINATOR.
func (c *Coordinator) Check() int16 {
	if ok, _ := c.Active(); ok {
		return 0
	}
	return kerr.NotCoordinator.Code
}

// propose proposes cmd and returns its Result.
func (c *Coordinator) propose(ctx context.Context, cmd *Command) (Result, error) {
	data, err := cmd.Encode()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ProposeTimeout)
	defer cancel()
	v, err := c.cfg.Propose(ctx, data)
	if err != nil {
		return Result{}, err
	}
	r, ok := v.(Result)
	if !ok {
		return Result{}, fmt.Errorf("groups: command applied with %T", v)
	}
	return r, nil
}

// proposeCode proposes cmd and folds the outcome into one Kafka code: a
// proposal that failed (leadership lost, timed out) is NOT_COORDINATOR, so
// the client finds the coordinator again and retries.
func (c *Coordinator) proposeCode(cmd *Command) (Result, int16) {
	r, err := c.propose(context.Background(), cmd)
	if err != nil {
		c.log.Debug("group proposal failed", "err", err)
		return r, kerr.NotCoordinator.Code
	}
	return r, r.Code
}

// newMemberID makes a member id as Kafka does: the client id (or the
// instance id of a static member), a dash and a random UUID.
func newMemberID(clientID, instanceID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	prefix := clientID
	if instanceID != "" {
		prefix = instanceID
	}
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
