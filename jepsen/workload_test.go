package jepsen

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// The tests in this file drive the workload against kfake, franz-go's
// in-memory fake Kafka cluster. kfake is a fake: one process, no
// replication and no real faults; it stands in for raftq here so that the
// driver, the history and the checkers can be tested together before a
// raftq cluster exists. Runs against real raftq clusters live with the
// `raftq jepsen run` command.

func newFake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func fakeWorkload(c *kfake.Cluster) WorkloadConfig {
	cfg := DefaultWorkloadConfig()
	cfg.Brokers = c.ListenAddrs()
	cfg.Topic = "jepsen-test"
	cfg.Partitions = 3
	cfg.ReplicationFactor = 1
	cfg.Producers, cfg.Consumers = 3, 2
	cfg.Rate, cfg.Burst = 400, 10
	cfg.Duration = 1500 * time.Millisecond
	cfg.OpTimeout = 2 * time.Second
	cfg.FetchMaxWait = 50 * time.Millisecond
	cfg.ReassignEvery = 6
	cfg.FinalReadTimeout = 15 * time.Second
	return cfg
}

// runWorkload runs setup, the workload and the final reads, and checks.
func runWorkload(t *testing.T, cfg WorkloadConfig) (History, *Results) {
	t.Helper()
	rec := NewRecorder(nil)
	w, err := NewWorkload(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	w.FinalReads(ctx)
	h := rec.History()
	res, err := Check(h, DefaultCheckConfig())
	if err != nil {
		t.Fatal(err)
	}
	return h, res
}

func countOps(h History, f F, t Type) int {
	n := 0
	for _, op := range h {
		if op.F == f && op.Type == t {
			n++
		}
	}
	return n
}

func recordsRead(h History) int {
	n := 0
	for _, op := range h {
		if op.F == FPoll && op.Type == OK {
			for _, r := range op.Reads {
				n += len(r.Records)
			}
		}
	}
	return n
}

func requireClean(t *testing.T, res *Results) {
	t.Helper()
	if res.Stats.ByF[FSend][OK] == 0 || res.Stats.ByF[FFinalRead][OK] == 0 {
		t.Fatalf("nothing to check: %+v", res.Stats.ByF)
	}
	for _, c := range res.Checkers {
		if c.Verdict != VerdictOK {
			t.Errorf("%s: %s %d %v %+v", c.Name, c.Verdict, c.Count, c.Counts, c.Examples)
		}
	}
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("%s", res.Summary())
	}
}

// countBounded makes a run end by op count, so that how much it does does
// not depend on how busy the machine is; the duration is only a cap.
func countBounded(cfg WorkloadConfig, ops int) WorkloadConfig {
	cfg.OpLimit, cfg.Duration = ops, 30*time.Second
	return cfg
}

func TestWorkload_CleanAssignRunAgainstFakeHasNoAnomalies(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(3))
	h, res := runWorkload(t, countBounded(fakeWorkload(c), 400))
	requireClean(t, res)
	if n := countOps(h, FSend, OK); n < 100 {
		t.Errorf("only %d ok sends", n)
	}
	if n := countOps(h, FSend, Invoke) + countOps(h, FPoll, Invoke) + countOps(h, FAssign, Invoke); n != 400 {
		t.Errorf("%d ops started, want the op limit of 400", n)
	}
	if countOps(h, FAssign, OK) == 0 || recordsRead(h) == 0 {
		t.Errorf("%d assigns, %d records polled", countOps(h, FAssign, OK), recordsRead(h))
	}
	if got, want := countOps(h, FFinalRead, OK), 3; got != want {
		t.Errorf("%d complete final reads, want %d", got, want)
	}
}

func TestWorkload_CleanSubscribeRunWithClientCrashes(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := fakeWorkload(c)
	cfg.PollMode = PollSubscribe
	cfg.Group = "jepsen-group"
	cfg.CrashP = 0.05
	h, res := runWorkload(t, countBounded(cfg, 500))
	requireClean(t, res)
	if countOps(h, FSubscribe, OK) == 0 || recordsRead(h) == 0 {
		t.Errorf("%d subscribes, %d records polled", countOps(h, FSubscribe, OK), recordsRead(h))
	}
}

func TestWorkload_AppendsThatTimeOutAreIndefiniteNotLost(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.OpTimeout = time.Second
	cfg.Workload.Duration = 3 * time.Second
	cfg.ReportDir = t.TempDir()
	// The broker appends, then answers REQUEST_TIMED_OUT (kfakeEnv's kill),
	// for longer than the op timeout.
	cfg.Faults = kfakeEnv(c)
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{{ID: 0, Kind: chaos.KindKill,
		Start: 200 * time.Millisecond, Stop: 2500 * time.Millisecond, Target: chaos.TargetOne, Nodes: []int{1}}}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, res)
	if n := res.Stats.ByF[FSend][Info]; n == 0 {
		t.Fatal("no indefinite sends: the fault did not bite")
	}
	if n := infoSendsRead(t, readHistoryFile(t, cfg.ReportDir)); n == 0 {
		t.Fatal("no indefinite send was read back; the case under test did not happen")
	}
}

// infoSendsRead counts indefinite sends whose value a read returned.
func infoSendsRead(t *testing.T, h History) int {
	t.Helper()
	a, err := analyze(h)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range a.sends {
		if s.typ() == Info && a.observed(s.v.Value) {
			n++
		}
	}
	return n
}

func TestWorkload_RetriesWithoutIdempotenceDuplicate(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.Idempotent = false
	cfg.ReportDir = t.TempDir()
	// For a second, every produce is appended but answered
	// REQUEST_TIMED_OUT (kfakeEnv's kill); a producer without idempotence retries and
	// appends the same record again.
	cfg.Faults = kfakeEnv(c)
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{{ID: 0, Kind: chaos.KindKill,
		Start: 200 * time.Millisecond, Stop: 1200 * time.Millisecond, Target: chaos.TargetOne, Nodes: []int{1}}}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Checker(CheckDuplicate); d.Verdict != VerdictFail || d.Count == 0 {
		t.Fatalf("duplicate: %+v", d)
	}
	if res.Valid {
		t.Fatalf("%s", res.Summary())
	}
}

// lyingBroker makes kfake acknowledge some produce requests without
// appending them: it answers with the offset the next real append will
// take. This is what an ack before commit looks like after the leader
// loses the write.
type lyingBroker struct {
	mu   sync.Mutex
	next map[int32]int64 // the log end, counted from what kfake appended
	n    int
	lied int
}

func (l *lyingBroker) control(req kmsg.Request) (kmsg.Response, error, bool) {
	pr := req.(*kmsg.ProduceRequest)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	lie := l.n%7 == 0
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range pr.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset, rp.LogAppendTime = p.Partition, l.next[p.Partition], -1
			rt.Partitions = append(rt.Partitions, rp)
			if !lie {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(p.Records); err == nil {
					l.next[p.Partition] += int64(b.NumRecords)
				}
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if lie {
		l.lied++
		return resp, nil, true
	}
	return nil, nil, false
}

func TestWorkload_BrokerThatAcksWithoutWritingIsCaught(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := fakeWorkload(c)
	cfg.Idempotent = false
	liar := &lyingBroker{next: map[int32]int64{}}
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return liar.control(req)
	})
	_, res := runWorkload(t, countBounded(cfg, 300))
	if liar.lied == 0 {
		t.Fatal("the broker never lied")
	}
	for _, name := range []string{CheckLostWrite, CheckUnseen, CheckInconsistent, CheckLinearizable} {
		if c := res.Checker(name); c.Verdict != VerdictFail {
			t.Errorf("%s: %s, want fail (%d lies)", name, c.Verdict, liar.lied)
		}
	}
	if got, want := res.Checker(CheckUnseen).Count, liar.lied; got != want {
		t.Errorf("unseen %d, want one per lie (%d)", got, want)
	}
	if res.Valid {
		t.Fatalf("%s", res.Summary())
	}
}

func TestWorkload_SendsToDeadBrokerAreIndefinite(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := fakeWorkload(c)
	cfg.Consumers = 0
	cfg.OpTimeout = time.Second
	cfg.Duration = 2 * time.Second
	rec := NewRecorder(nil)
	w, err := NewWorkload(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close() // every send from now on goes nowhere
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	if countOps(h, FSend, OK) != 0 || countOps(h, FSend, Fail) != 0 || countOps(h, FSend, Info) == 0 {
		t.Fatalf("ok %d fail %d info %d", countOps(h, FSend, OK), countOps(h, FSend, Fail), countOps(h, FSend, Info))
	}
	if _, err := pairOps(h); err != nil {
		t.Fatal(err) // each info ended its process; new ones took over
	}
}

func TestClassifySend(t *testing.T) {
	if got := classifySend(kerr.MessageTooLarge); got != Fail {
		t.Errorf("message too large: %s", got)
	}
	for _, err := range []error{kerr.RequestTimedOut, kerr.NotLeaderForPartition, context.DeadlineExceeded, errSendTimeout, errors.New("x")} {
		if got := classifySend(err); got != Info {
			t.Errorf("%v: %s, want info", err, got)
		}
	}
}

func TestWorkloadConfig_Validate(t *testing.T) {
	if err := DefaultWorkloadConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*WorkloadConfig){
		"no brokers":     func(c *WorkloadConfig) { c.Brokers = nil },
		"no topic":       func(c *WorkloadConfig) { c.Topic = "" },
		"no partitions":  func(c *WorkloadConfig) { c.Partitions = 0 },
		"no processes":   func(c *WorkloadConfig) { c.Producers, c.Consumers = 0, 0 },
		"zero rate":      func(c *WorkloadConfig) { c.Rate = 0 },
		"bad acks":       func(c *WorkloadConfig) { c.Acks = "two" },
		"idem leader":    func(c *WorkloadConfig) { c.Acks = AcksLeader },
		"bad mode":       func(c *WorkloadConfig) { c.PollMode = "peek" },
		"group-less sub": func(c *WorkloadConfig) { c.PollMode, c.Group = PollSubscribe, "" },
		"crash p":        func(c *WorkloadConfig) { c.CrashP = 2 },
		"op limit":       func(c *WorkloadConfig) { c.OpLimit = -1 },
		"short timeout":  func(c *WorkloadConfig) { c.OpTimeout = 500 * time.Millisecond },
	} {
		c := DefaultWorkloadConfig()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
