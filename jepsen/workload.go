package jepsen

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/internal/logging"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"
)

// Acks levels a WorkloadConfig may ask for.
const (
	AcksAll    = "all"
	AcksLeader = "leader"
	AcksNone   = "none"
)

// Poll modes.
const (
	// PollAssign assigns partitions by hand and seeks (kgo.ConsumePartitions).
	PollAssign = "assign"
	// PollSubscribe joins a consumer group (kgo.ConsumerGroup).
	PollSubscribe = "subscribe"
)

// WorkloadConfig describes the queue workload.
type WorkloadConfig struct {
	// Brokers are the seed addresses.
	Brokers []string
	// Topic is the topic to write and read. It must be fresh: the checkers
	// treat any value no send of this run wrote as a phantom.
	Topic string
	// Partitions and ReplicationFactor shape the topic CreateTopic makes.
	Partitions        int32
	ReplicationFactor int16
	// CreateTopic makes the topic in Setup; otherwise it must exist.
	CreateTopic bool
	// TopicConfigs are the topic configs CreateTopic sets (Kafka names:
	// replication.mode, min.insync.replicas, flush.messages, ...); nil
	// leaves every one at the broker's default.
	TopicConfigs map[string]string
	// Producers and Consumers are the numbers of concurrent processes.
	Producers int
	Consumers int
	// Rate bounds all processes' operations per second together, through
	// one token bucket of Burst tokens.
	Rate  float64
	Burst int
	// Duration is how long operations start; ops in flight then finish.
	Duration time.Duration
	// OpLimit, when positive, also ends the run after that many ops
	// (sends, polls, assigns, ...) have started, whichever comes first.
	OpLimit int
	// Acks is AcksAll, AcksLeader or AcksNone.
	Acks string
	// Idempotent turns on kgo's idempotent producer (needs AcksAll).
	Idempotent bool
	// OpTimeout bounds a send or poll; a send without an answer by then is
	// recorded as info.
	OpTimeout time.Duration
	// FetchMaxWait is how long a broker may hold a fetch for data.
	FetchMaxWait time.Duration
	// PollMode is PollAssign or PollSubscribe; Group names the group.
	PollMode string
	Group    string
	// ReassignEvery is the mean number of polls between a consumer's
	// assigns (assign mode) or resubscribes (subscribe mode).
	ReassignEvery int
	// CrashP is the chance per consumer op that the consumer's client is
	// torn down (recorded as a crash) and a new process takes over.
	CrashP float64
	// Txn makes the producers run Kafka transactions (TxnSends sends
	// each, across partitions, some aborted on purpose) instead of single
	// sends. It needs AcksAll, Idempotent and ReadCommitted.
	Txn bool
	// TxnSends is the most sends one transaction makes (at least 1; each
	// transaction draws 1..TxnSends, each to a random partition).
	TxnSends int
	// TxnPollP is the chance that a transaction first polls its
	// process's read_committed consumer; TxnAbortP the chance that it is
	// meant to abort.
	TxnPollP  float64
	TxnAbortP float64
	// ReadCommitted makes every consumer and the final reads fetch with
	// read_committed isolation (no aborted or still open transactional
	// records); on whenever Txn is.
	ReadCommitted bool
	// FinalReadTimeout bounds the final read of each partition.
	FinalReadTimeout time.Duration
	// Seed makes the workload's choices repeatable.
	Seed uint64
	// ClientOpts are added to every kgo client (e.g. dialers in tests).
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// DefaultWorkloadConfig returns the workload `raftq jepsen run` uses.
func DefaultWorkloadConfig() WorkloadConfig {
	return WorkloadConfig{
		Brokers: []string{"127.0.0.1:9092"}, Topic: "jepsen", Partitions: 4, ReplicationFactor: 3,
		CreateTopic: true, Producers: 6, Consumers: 3, Rate: 2000, Burst: 100,
		Duration: 60 * time.Second, Acks: AcksAll, Idempotent: true,
		OpTimeout: 5 * time.Second, FetchMaxWait: 250 * time.Millisecond,
		PollMode: PollAssign, Group: "jepsen", ReassignEvery: 16,
		TxnSends: 4, TxnPollP: 0.5, TxnAbortP: 0.2,
		FinalReadTimeout: 60 * time.Second, Seed: 1,
	}
}

// Validate reports a setting out of range.
func (c WorkloadConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("no brokers: %w", ErrBadConfig)
	case c.Topic == "":
		return fmt.Errorf("no topic: %w", ErrBadConfig)
	case c.Partitions < 1:
		return fmt.Errorf("partitions %d: %w", c.Partitions, ErrBadConfig)
	case c.CreateTopic && c.ReplicationFactor < 1:
		return fmt.Errorf("replication factor %d: %w", c.ReplicationFactor, ErrBadConfig)
	case c.Producers < 0 || c.Consumers < 0 || c.Producers+c.Consumers == 0:
		return fmt.Errorf("%d producers and %d consumers: %w", c.Producers, c.Consumers, ErrBadConfig)
	case c.Rate <= 0 || c.Burst < 1:
		return fmt.Errorf("rate %g burst %d: both must be positive: %w", c.Rate, c.Burst, ErrBadConfig)
	case c.Duration <= 0 || c.FetchMaxWait <= 0 || c.FinalReadTimeout <= 0:
		return fmt.Errorf("durations and timeouts must be positive: %w", ErrBadConfig)
	case c.OpTimeout < time.Second:
		return fmt.Errorf("op timeout %s: kgo's record timeout must be at least 1s: %w", c.OpTimeout, ErrBadConfig)
	case c.Acks != AcksAll && c.Acks != AcksLeader && c.Acks != AcksNone:
		return fmt.Errorf("acks %q, want all, leader or none: %w", c.Acks, ErrBadConfig)
	case c.Idempotent && c.Acks != AcksAll:
		return fmt.Errorf("an idempotent producer needs acks=all: %w", ErrBadConfig)
	case c.PollMode != PollAssign && c.PollMode != PollSubscribe:
		return fmt.Errorf("poll mode %q, want assign or subscribe: %w", c.PollMode, ErrBadConfig)
	case c.PollMode == PollSubscribe && c.Group == "":
		return fmt.Errorf("subscribe needs a group: %w", ErrBadConfig)
	case c.ReassignEvery < 1:
		return fmt.Errorf("reassign every %d polls: %w", c.ReassignEvery, ErrBadConfig)
	case c.OpLimit < 0:
		return fmt.Errorf("op limit %d: %w", c.OpLimit, ErrBadConfig)
	case c.CrashP < 0 || c.CrashP > 1:
		return fmt.Errorf("crash probability %g: %w", c.CrashP, ErrBadConfig)
	case c.TxnPollP < 0 || c.TxnPollP > 1 || c.TxnAbortP < 0 || c.TxnAbortP > 1:
		return fmt.Errorf("txn poll probability %g, abort probability %g: %w", c.TxnPollP, c.TxnAbortP, ErrBadConfig)
	case c.Txn && (c.TxnSends < 1 || c.TxnSends > maxTxnSends):
		return fmt.Errorf("txn sends %d, want 1..%d: %w", c.TxnSends, maxTxnSends, ErrBadConfig)
	case c.Txn && (c.Acks != AcksAll || !c.Idempotent):
		return fmt.Errorf("transactions need acks=all and an idempotent producer: %w", ErrBadConfig)
	case c.Txn && !c.ReadCommitted:
		return fmt.Errorf("transactions need read_committed consumers (ReadCommitted): %w", ErrBadConfig)
	}
	for k := range c.TopicConfigs {
		if k == "" {
			return fmt.Errorf("topic config with an empty name: %w", ErrBadConfig)
		}
	}
	return nil
}

// Workload drives producers and consumers against a Kafka-compatible
// cluster and records every call. Run's goroutines each own one process
// (and its kgo client) at a time; the Recorder is the only shared state
// besides the rate limiter and the process counter.
type Workload struct {
	cfg     WorkloadConfig
	rec     *Recorder
	log     *slog.Logger
	limiter *rate.Limiter
	procs   atomic.Int64 // next unused process id
	started atomic.Int64 // ops started, for OpLimit
}

// NewWorkload checks cfg and returns a workload recording into rec.
func NewWorkload(cfg WorkloadConfig, rec *Recorder) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{
		cfg: cfg, rec: rec,
		log:     logging.Discard(cfg.Logger).With("topic", cfg.Topic),
		limiter: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst),
	}
	w.procs.Store(int64(cfg.Producers + cfg.Consumers))
	return w, nil
}

// newProcess hands out a process id no one has used.
func (w *Workload) newProcess() int { return int(w.procs.Add(1) - 1) }

// rng returns a generator for one worker, derived from the seed.
func (w *Workload) rng(worker int) *rand.Rand {
	return rand.New(rand.NewPCG(w.cfg.Seed, uint64(worker)+1))
}

func (w *Workload) client(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(w.cfg.Brokers...)}, w.cfg.ClientOpts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("new kafka client: %w", err)
	}
	return cl, nil
}

// isolation is the consumers' fetch isolation level.
func (w *Workload) isolation() kgo.Opt {
	if w.cfg.ReadCommitted {
		return kgo.FetchIsolationLevel(kgo.ReadCommitted())
	}
	return kgo.FetchIsolationLevel(kgo.ReadUncommitted())
}

// Setup creates the topic when asked to.
func (w *Workload) Setup(ctx context.Context) error {
	if !w.cfg.CreateTopic {
		return nil
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var configs map[string]*string
	for k, v := range w.cfg.TopicConfigs {
		if configs == nil {
			configs = map[string]*string{}
		}
		configs[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, w.cfg.Partitions, w.cfg.ReplicationFactor, configs, w.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", w.cfg.Topic, err)
	}
	return nil
}

// Run starts operations for the configured duration, then waits for the
// operations in flight. Canceling ctx aborts them (they are recorded as
// info). It returns ctx's error if ctx ended first.
func (w *Workload) Run(ctx context.Context) error {
	stopAt := time.Now().Add(w.cfg.Duration)
	var wg sync.WaitGroup
	for i := range w.cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.cfg.Txn {
				w.transact(ctx, stopAt, i)
			} else {
				w.produce(ctx, stopAt, i)
			}
		}()
	}
	for i := range w.cfg.Consumers {
		worker := w.cfg.Producers + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.consume(ctx, stopAt, worker)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// wait takes a token, or reports false when the run is over.
func (w *Workload) wait(ctx context.Context, stopAt time.Time) bool {
	dctx, cancel := context.WithDeadline(ctx, stopAt)
	defer cancel()
	if w.limiter.Wait(dctx) != nil || !time.Now().Before(stopAt) {
		return false
	}
	return w.cfg.OpLimit <= 0 || w.started.Add(1) <= int64(w.cfg.OpLimit)
}
