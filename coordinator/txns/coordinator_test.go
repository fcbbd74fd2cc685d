package txns

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/raftgroup"
)

// fakeLog stands in for the transaction partition's raft group (a
// function-field fake): a proposal is applied at once, and every entry is
// kept so that another replica can replay it.
type fakeLog struct {
	mu      sync.Mutex
	m       *Machine
	entries []raftgroup.Entry
	refuse  bool // proposals fail, as on a deposed leader
}

func (l *fakeLog) propose(_ context.Context, data []byte) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse {
		return nil, raftgroup.ErrNotLeader
	}
	e := raftgroup.Entry{Index: uint64(len(l.entries) + 1), Term: 1, Data: data}
	l.entries = append(l.entries, e)
	return l.m.Apply(e)
}

// markers is a fake of the partitions and group coordinators that take
// markers: it records each attempt and answers with fail (nil: all done).
type markers struct {
	mu       sync.Mutex
	attempts []PendingTxn
	epochs   []uint64
	fail     func(PendingTxn) (Partitions, []string, error)
}

func (w *markers) write(ctx context.Context, p PendingTxn, epoch uint64) (Partitions, []string, error) {
	w.mu.Lock()
	w.attempts = append(w.attempts, p)
	w.epochs = append(w.epochs, epoch)
	fail := w.fail
	w.mu.Unlock()
	if fail != nil {
		return fail(p)
	}
	return p.Partitions, p.Groups, nil
}

func (w *markers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.attempts)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type coordHarness struct {
	t      *testing.T
	log    *fakeLog
	clk    *clock
	marks  *markers
	blocks int64 // next block start
	c      *Coordinator
}

func newCoordHarness(t *testing.T, m *Machine, clk *clock, term uint64) *coordHarness {
	t.Helper()
	h := &coordHarness{t: t, log: &fakeLog{m: m}, clk: clk, marks: &markers{}, blocks: 5000}
	cfg := DefaultConfig()
	cfg.Machine, cfg.Propose, cfg.Now, cfg.WriteMarkers = m, h.log.propose, clk.Now, h.marks.write
	cfg.LowProducerIDs = 2
	cfg.AllocateProducerIDs = func(context.Context) (ProducerIDBlock, error) {
		b := ProducerIDBlock{Start: h.blocks, Count: 3}
		h.blocks += 3
		return b, nil
	}
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(context.Background(), term); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Deactivate)
	h.c = c
	return h
}

// eventually polls cond until it holds, ticking the coordinator.
func (h *coordHarness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("never: %s", what)
		}
		h.c.Tick(context.Background())
		time.Sleep(time.Millisecond)
	}
}

func (h *coordHarness) state(id string) State {
	if t := h.c.Machine().Txn(id); t != nil {
		return t.State
	}
	return ""
}

func TestCoordinator_CommitWritesMarkers(t *testing.T) {
	ctx := context.Background()
	h := newCoordHarness(t, NewMachine(), &clock{now: time.UnixMilli(t0)}, 4)
	// No ids yet: the coordinator reserves and grants a block itself.
	pid, epoch, code := h.c.InitProducerID(ctx, "a", 60_000, -1, -1)
	if code != 0 || pid != 5000 || epoch != 0 {
		t.Fatalf("init: %d %d %s", pid, epoch, codeName(code))
	}
	if _, _, code := h.c.InitProducerID(ctx, "b", int32(time.Hour.Milliseconds()), -1, -1); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("init above the max timeout: %s", codeName(code))
	}
	res := h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Partitions: Partitions{"t": {0, 1}}}})
	if len(res) != 1 || res[0].Code != 0 {
		t.Fatalf("add: %+v", res)
	}
	wantCode(t, "offsets", h.c.AddOffsets(ctx, "a", pid, epoch, "g"), nil)
	wantCode(t, "commit", h.c.EndTxn(ctx, "a", pid, epoch, true), nil)
	h.eventually("the commit completes", func() bool { return h.state("a") == StateCompleteCommit })
	h.marks.mu.Lock()
	got, epochs := h.marks.attempts, h.marks.epochs
	h.marks.mu.Unlock()
	want := PendingTxn{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Commit: true, Partitions: Partitions{"t": {0, 1}}, Groups: []string{"g"}, MarkerSeq: 1}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) || epochs[0] != 4 {
		t.Fatalf("marker attempts %+v at epochs %v, want one %+v at 4", got, epochs, want)
	}
	wantCode(t, "retried commit", h.c.EndTxn(ctx, "a", pid, epoch, true), nil)
	// Ticks top the producer ids up before they run out.
	h.eventually("a second block", func() bool { return h.c.Machine().FreeProducerIDs() >= 2 })
}

func TestCoordinator_MarkersRetriedUntilDone(t *testing.T) {
	ctx := context.Background()
	h := newCoordHarness(t, NewMachine(), &clock{now: time.UnixMilli(t0)}, 1)
	fails := 0
	h.marks.fail = func(p PendingTxn) (Partitions, []string, error) {
		switch fails++; fails {
		case 1, 2:
			return nil, nil, errors.New("partition leader unreachable")
		case 3:
			return Partitions{"t": {0}}, nil, errors.New("one partition done")
		}
		return p.Partitions, p.Groups, nil
	}
	pid, epoch, _ := h.c.InitProducerID(ctx, "a", 60_000, -1, -1)
	h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Partitions: Partitions{"t": {0, 1}}}})
	wantCode(t, "abort", h.c.EndTxn(ctx, "a", pid, epoch, false), nil)
	h.eventually("the abort completes", func() bool { return h.state("a") == StateCompleteAbort })
	h.marks.mu.Lock()
	defer h.marks.mu.Unlock()
	if n := len(h.marks.attempts); n != 4 {
		t.Fatalf("%d attempts, want 4", n)
	}
	if last := h.marks.attempts[3]; !reflect.DeepEqual(last.Partitions, Partitions{"t": {1}}) {
		t.Fatalf("the last attempt wrote %v again, want only what was left", last.Partitions)
	}
}

// TestCoordinator_FailoverResumesMarkers: a leader that dies between
// PrepareCommit and CompleteCommit leaves the markers to the next one.
func TestCoordinator_FailoverResumesMarkers(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.UnixMilli(t0)}
	old := newCoordHarness(t, NewMachine(), clk, 1)
	block := make(chan struct{})
	old.marks.fail = func(PendingTxn) (Partitions, []string, error) {
		<-block // the old leader never gets its markers out
		return nil, nil, errors.New("deposed")
	}
	pid, epoch, _ := old.c.InitProducerID(ctx, "a", 60_000, -1, -1)
	old.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Partitions: Partitions{"t": {2}}}})
	wantCode(t, "commit", old.c.EndTxn(ctx, "a", pid, epoch, true), nil)
	old.log.mu.Lock()
	old.log.refuse = true
	entries := old.log.entries
	old.log.mu.Unlock()
	close(block)
	old.c.Deactivate()
	if code := old.c.EndTxn(ctx, "a", pid, epoch, true); code != kerr.NotCoordinator.Code {
		t.Fatalf("deposed coordinator answered %s", codeName(code))
	}

	follower := NewMachine()
	for _, e := range entries {
		_, _ = follower.Apply(e)
	}
	nl := newCoordHarness(t, follower, clk, 2)
	nl.eventually("the new leader completes the commit", func() bool { return nl.state("a") == StateCompleteCommit })
	nl.marks.mu.Lock()
	defer nl.marks.mu.Unlock()
	if len(nl.marks.attempts) != 1 || nl.marks.epochs[0] != 2 || !nl.marks.attempts[0].Commit {
		t.Fatalf("new leader's attempts %+v at %v", nl.marks.attempts, nl.marks.epochs)
	}
}

func TestCoordinator_TimeoutAbortsAndFences(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.UnixMilli(t0)}
	h := newCoordHarness(t, NewMachine(), clk, 1)
	pid, epoch, _ := h.c.InitProducerID(ctx, "a", 1000, -1, -1)
	h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Partitions: Partitions{"t": {0}}}})
	h.c.Tick(ctx)
	if h.state("a") != StateOngoing {
		t.Fatal("aborted before the timeout")
	}
	clk.advance(1001 * time.Millisecond)
	h.eventually("the timed-out transaction is aborted", func() bool { return h.state("a") == StateCompleteAbort })
	wantCode(t, "the timed-out producer", h.c.EndTxn(ctx, "a", pid, epoch, true), kerr.ProducerFenced)
	// A zombie's transaction is aborted by the new producer's init.
	p2, e2, _ := h.c.InitProducerID(ctx, "z", 60_000, -1, -1)
	h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "z", ProducerID: p2, ProducerEpoch: e2, Partitions: Partitions{"t": {0}}}})
	if _, _, code := h.c.InitProducerID(ctx, "z", 60_000, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init over a zombie: %s", codeName(code))
	}
	h.eventually("the zombie's transaction is aborted", func() bool { return h.state("z") == StateCompleteAbort })
	if _, e, code := h.c.InitProducerID(ctx, "z", 60_000, -1, -1); code != 0 || e != e2+2 {
		t.Fatalf("retried init: epoch %d %s, want %d", e, codeName(code), e2+2)
	}
	// Idle ids expire.
	clk.advance(8 * 24 * time.Hour)
	h.eventually("idle ids expire", func() bool { return len(h.c.Machine().Txns()) == 0 })
}

func TestCoordinator_NotCoordinator(t *testing.T) {
	ctx := context.Background()
	h := newCoordHarness(t, NewMachine(), &clock{now: time.UnixMilli(t0)}, 1)
	h.log.mu.Lock()
	h.log.refuse = true
	h.log.mu.Unlock()
	if _, _, code := h.c.InitProducerID(ctx, "a", 1000, -1, -1); code != kerr.NotCoordinator.Code {
		t.Fatalf("init on a deposed leader: %s", codeName(code))
	}
	h.c.Deactivate()
	res := h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", Partitions: Partitions{"t": {0}}}})
	if res[0].Code != kerr.NotCoordinator.Code || res[0].Partitions["t"][0] != kerr.NotCoordinator.Code {
		t.Fatalf("add on an inactive coordinator: %+v", res)
	}
	if h.c.Check() != kerr.NotCoordinator.Code {
		t.Fatal("an inactive coordinator checks out")
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := DefaultConfig()
	ok.Machine, ok.Propose = NewMachine(), (&fakeLog{}).propose
	ok.AllocateProducerIDs = func(context.Context) (ProducerIDBlock, error) { return ProducerIDBlock{}, nil }
	ok.WriteMarkers = (&markers{}).write
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no machine":       func(c *Config) { c.Machine = nil },
		"no markers":       func(c *Config) { c.WriteMarkers = nil },
		"no allocator":     func(c *Config) { c.AllocateProducerIDs = nil },
		"zero max timeout": func(c *Config) { c.MaxTimeout = 0 },
		"huge max timeout": func(c *Config) { c.MaxTimeout = 1 << 62 },
		"zero expiration":  func(c *Config) { c.IDExpiration = 0 },
		"negative low ids": func(c *Config) { c.LowProducerIDs = -1 },
		"zero propose":     func(c *Config) { c.ProposeTimeout = 0 },
	} {
		c := ok
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
}

// TestCoordinator_VerifyThroughTheLog: a partition leader's verify-only
// check is answered per partition and adds nothing.
func TestCoordinator_VerifyThroughTheLog(t *testing.T) {
	ctx := context.Background()
	h := newCoordHarness(t, NewMachine(), &clock{now: time.UnixMilli(t0)}, 1)
	pid, epoch, _ := h.c.InitProducerID(ctx, "a", 60_000, -1, -1)
	h.c.AddPartitions(ctx, []AddTxn{{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Partitions: Partitions{"t": {0}}}})
	h.log.mu.Lock()
	n := len(h.log.entries)
	h.log.mu.Unlock()
	res := h.c.AddPartitions(ctx, []AddTxn{
		{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: true, Partitions: Partitions{"t": {0, 1}}},
		{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch + 1, VerifyOnly: true, Partitions: Partitions{"t": {0}}},
	})
	want := []TxnResult{
		{TransactionalID: "a", Partitions: map[string]map[int32]int16{"t": {0: 0, 1: kerr.TransactionAbortable.Code}}},
		{TransactionalID: "a", Code: kerr.ProducerFenced.Code, Partitions: map[string]map[int32]int16{"t": {0: kerr.ProducerFenced.Code}}},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("verify: %+v\nwant %+v", res, want)
	}
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	if len(h.log.entries) != n+1 {
		t.Fatalf("verification took %d entries, want 1", len(h.log.entries)-n)
	}
	if tx := h.c.Machine().Txn("a"); tx.Partitions.Contains("t", 1) {
		t.Fatal("verification added a partition")
	}
}
