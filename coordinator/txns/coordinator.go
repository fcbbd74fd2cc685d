package txns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/logging"
)

// Config configures the Coordinator of one transaction partition.
type Config struct {
	// Partition is the transaction partition's index (for logs).
	Partition int32
	// Machine is the partition's replicated state.
	Machine *Machine
	// Propose proposes an encoded Command to the partition's raft group
	// and waits until it is applied here, returning what Machine.Apply
	// returned. Required.
	Propose func(ctx context.Context, data []byte) (any, error)
	// AllocateProducerIDs reserves a block of producer ids in the
	// metadata group (coordinator.AllocateProducerIDs). Required.
	AllocateProducerIDs func(ctx context.Context) (ProducerIDBlock, error)
	// WriteMarkers writes txn's markers (WriteTxnMarkers with
	// coordinatorEpoch) to its partitions' leaders and hands its groups'
	// offsets to their coordinators, returning what is done; an error
	// means the rest is retried at a later Tick. A partition whose topic
	// is gone counts as done, as Kafka drops its markers. Each attempt's
	// ctx ends after ProposeTimeout, or when the coordinator is
	// deactivated. Required.
	WriteMarkers func(ctx context.Context, txn PendingTxn, coordinatorEpoch uint64) (Partitions, []string, error)
	// Now is the coordinator's clock (default time.Now). Its readings go
	// into commands as NowMs; apply never reads a clock.
	Now func() time.Time

	// MaxTimeout is transaction.max.timeout.ms: longer transaction
	// timeouts get INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms.
	IDExpiration time.Duration
	// LowProducerIDs is how few free producer ids make the coordinator
	// reserve and grant another block.
	LowProducerIDs int64
	// ProposeTimeout bounds each proposal's wait.
	ProposeTimeout time.Duration

	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		Now:            time.Now,
		MaxTimeout:     15 * time.Minute,
		IDExpiration:   7 * 24 * time.Hour,
		LowProducerIDs: 100,
		ProposeTimeout: 10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.Machine == nil || c.Propose == nil || c.AllocateProducerIDs == nil || c.WriteMarkers == nil:
		return errors.New("txns: Machine, Propose, AllocateProducerIDs and WriteMarkers are required")
	case c.MaxTimeout < time.Millisecond || c.MaxTimeout.Milliseconds() > 1<<31-1:
		return fmt.Errorf("txns: max transaction timeout %s outside 1ms..%dms", c.MaxTimeout, 1<<31-1)
	case c.IDExpiration < time.Millisecond:
		return errors.New("txns: transactional id expiration must be at least 1ms")
	case c.LowProducerIDs < 0:
		return errors.New("txns: negative low producer ids")
	case c.ProposeTimeout <= 0:
		return errors.New("txns: propose timeout must be positive")
	}
	return nil
}

// Coordinator is the transaction coordinator of one transaction
// partition while this node leads it. Everything it decides is proposed
// to the partition's raft group and answered once applied; its only soft
// state is which markers it is writing now, which a new leader rebuilds
// from Machine.Pending.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	grantMu sync.Mutex // serialises producer id grants; held across their proposals

	mu      sync.Mutex // guards active, term, ctx, cancel, writing, finished; a leaf
	active  bool
	term    uint64
	ctx     context.Context // ends at Deactivate
	cancel  context.CancelFunc
	writing map[string]bool // transactional ids whose markers are being written
	// finished counts the writers that ended, so that writeMarkers can
	// tell a Pending read that one of them made stale.
	finished uint64
	wg       sync.WaitGroup // marker writers
}

// NewCoordinator returns an inactive coordinator.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Coordinator{cfg: cfg, log: logging.Discard(cfg.Logger).With("txn_partition", cfg.Partition)}, nil
}

// Machine returns the partition's state machine.
func (c *Coordinator) Machine() *Machine { return c.cfg.Machine }

// Active reports whether the coordinator serves, and for which term.
func (c *Coordinator) Active() (bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active, c.term
}

// Check returns 0 when the coordinator serves, else NOT_COORDINATOR.
func (c *Coordinator) Check() int16 {
	if ok, _ := c.Active(); ok {
		return 0
	}
	return kerr.NotCoordinator.Code
}

// Activate makes this node the coordinator for term: it proposes a
// barrier (so that every entry of earlier terms is applied and the
// coordinator epoch is term), then resumes the markers of every
// transaction left in PrepareCommit or PrepareAbort.
func (c *Coordinator) Activate(ctx context.Context, term uint64) error {
	if _, err := c.propose(ctx, &Command{Barrier: &Barrier{Term: term}}); err != nil {
		return fmt.Errorf("transaction partition %d: barrier: %w", c.cfg.Partition, err)
	}
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.active, c.term, c.writing = true, term, map[string]bool{}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.Unlock()
	pending := c.cfg.Machine.Pending()
	c.log.Info("transaction coordinator active", "term", term, "pending_markers", len(pending))
	c.writeMarkers()
	return nil
}

// Deactivate stops serving: marker writes in flight are cancelled and
// waited for; the next leader resumes them.
func (c *Coordinator) Deactivate() {
	c.mu.Lock()
	was, cancel := c.active, c.cancel
	c.active, c.cancel, c.writing = false, nil, nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	if was {
		c.log.Info("transaction coordinator inactive")
	}
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
		return Result{}, fmt.Errorf("txns: command applied with %T", v)
	}
	return r, nil
}

// proposeCode proposes cmd while active: a proposal that failed
// (leadership lost, timed out) is NOT_COORDINATOR, so the client finds
// the coordinator again and retries.
func (c *Coordinator) proposeCode(ctx context.Context, cmd *Command) Result {
	if code := c.Check(); code != 0 {
		return Result{Code: code}
	}
	r, err := c.propose(ctx, cmd)
	if err != nil {
		c.log.Debug("transaction proposal failed", "err", err)
		return Result{Code: kerr.NotCoordinator.Code}
	}
	return r
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// InitProducerID answers InitProducerId for a transactional id (the
// request's producer id and epoch: -1 -1, or KIP-360's). It returns the
// producer id, epoch and Kafka code; a fenced Ongoing transaction's abort
// markers are written at once.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, producerID int64, epoch int16) (int64, int16, int16) {
	cmd := &Command{InitProducerID: &InitProducerID{TransactionalID: id, TimeoutMs: timeoutMs,
		MaxTimeoutMs: int32(c.cfg.MaxTimeout.Milliseconds()), ProducerID: producerID, ProducerEpoch: epoch, NowMs: c.nowMs()}}
	r := c.proposeCode(ctx, cmd)
	if r.NeedProducerIDs && c.grant(ctx) == nil {
		cmd.InitProducerID.NowMs = c.nowMs()
		r = c.proposeCode(ctx, cmd)
	}
	if r.Code != 0 && r.Code != kerr.NotCoordinator.Code {
		c.writeMarkers() // a fenced transaction's abort
	}
	if r.Code != 0 {
		return noProducer, noProducer, r.Code
	}
	return r.ProducerID, r.ProducerEpoch, 0
}

// AddPartitions answers AddPartitionsToTxn: one transaction for a v3-
// client request, a v4+ batch with verify-only checks.
func (c *Coordinator) AddPartitions(ctx context.Context, txns []AddTxn) []TxnResult {
	r := c.proposeCode(ctx, &Command{AddPartitions: &AddPartitions{Txns: txns, NowMs: c.nowMs()}})
	if r.Code != 0 {
		out := make([]TxnResult, 0, len(txns))
		for _, a := range txns {
			out = append(out, uniform(a, r.Code))
		}
		return out
	}
	return r.Txns
}

// AddOffsets answers AddOffsetsToTxn.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string) int16 {
	return c.proposeCode(ctx, &Command{AddOffsets: &AddOffsets{TransactionalID: id, ProducerID: producerID,
		ProducerEpoch: epoch, Group: group, NowMs: c.nowMs()}}).Code
}

// EndTxn answers EndTxn. The client is answered once the Prepare state is
// replicated; the markers are written after, and retried until done.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool) int16 {
	r := c.proposeCode(ctx, &Command{EndTxn: &EndTxn{TransactionalID: id, ProducerID: producerID,
		ProducerEpoch: epoch, Commit: commit, NowMs: c.nowMs()}})
	if r.Code == 0 {
		c.writeMarkers()
	}
	return r.Code
}

// Tick runs the coordinator's clocks: it grants producer ids before they
// run out, aborts timed-out transactions and expires idle ids (proposing
// a Tick only when one is due), and retries unfinished markers. The
// owner calls it periodically (the broker every 100ms).
func (c *Coordinator) Tick(ctx context.Context) {
	if c.Check() != 0 {
		return
	}
	if c.cfg.Machine.FreeProducerIDs() < c.cfg.LowProducerIDs {
		if err := c.grant(ctx); err != nil {
			c.log.Debug("producer id grant failed", "err", err)
		}
	}
	now, exp := c.nowMs(), c.cfg.IDExpiration.Milliseconds()
	if c.cfg.Machine.TickDue(now, exp) {
		r := c.proposeCode(ctx, &Command{Tick: &Tick{NowMs: now, ExpirationMs: exp}})
		if len(r.Aborted) > 0 || len(r.Expired) > 0 {
			c.log.Info("transaction timers", "aborted", r.Aborted, "expired", r.Expired)
		}
	}
	c.writeMarkers()
}

// grant reserves a block of producer ids and grants it to the partition.
func (c *Coordinator) grant(ctx context.Context) error {
	c.grantMu.Lock()
	defer c.grantMu.Unlock()
	if c.cfg.Machine.FreeProducerIDs() >= max(c.cfg.LowProducerIDs, 1) {
		return nil // another caller granted meanwhile
	}
	b, err := c.cfg.AllocateProducerIDs(ctx)
	if err != nil {
		return fmt.Errorf("allocate producer ids: %w", err)
	}
	r := c.proposeCode(ctx, &Command{GrantProducerIDs: &GrantProducerIDs{b}})
	if r.Code != 0 {
		return fmt.Errorf("grant producer ids %d+%d: %w", b.Start, b.Count, kerr.ErrorForCode(r.Code))
	}
	return nil
}

// writeMarkers starts a writer for every pending transaction that has
// none.
func (c *Coordinator) writeMarkers() {
	c.mu.Lock()
	seen := c.finished
	c.mu.Unlock()
	pending := c.cfg.Machine.Pending()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active || c.finished != seen {
		return // a writer ended meanwhile, maybe with its transaction done: the next tick looks again
	}
	for _, p := range pending {
		if c.writing[p.TransactionalID] {
			continue
		}
		c.writing[p.TransactionalID] = true
		c.wg.Add(1)
		go c.writeTxnMarkers(c.ctx, c.writing, p, c.term)
	}
}

// writeTxnMarkers writes one transaction's markers and reports what is
// done. writing is the map of the activation that started it.
func (c *Coordinator) writeTxnMarkers(ctx context.Context, writing map[string]bool, p PendingTxn, epoch uint64) {
	defer c.wg.Done()
	defer func() {
		c.mu.Lock()
		delete(writing, p.TransactionalID)
		c.finished++
		c.mu.Unlock()
	}()
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ProposeTimeout)
	parts, groups, err := c.cfg.WriteMarkers(wctx, p, epoch)
	cancel()
	if err != nil {
		c.log.Debug("transaction markers not all written", "transactional_id", p.TransactionalID, "err", err)
	}
	if parts.Len() == 0 && len(groups) == 0 && (err != nil || p.Partitions.Len() > 0 || len(p.Groups) > 0) {
		return // nothing done: retried at the next tick
	}
	r := c.proposeCode(ctx, &Command{MarkersWritten: &MarkersWritten{TransactionalID: p.TransactionalID,
		ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: p.Commit, Partitions: parts, Groups: groups, NowMs: c.nowMs()}})
	if r.Code != 0 {
		c.log.Debug("markers written not recorded", "transactional_id", p.TransactionalID, "code", r.Code)
	}
}
