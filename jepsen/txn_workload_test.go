package jepsen

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

func txnConfig() WorkloadConfig {
	c := DefaultWorkloadConfig()
	c.Txn, c.ReadCommitted = true, true
	return c
}

func TestWorkloadConfig_ValidateTxn(t *testing.T) {
	if err := txnConfig().Validate(); err != nil {
		t.Fatalf("default txn config: %v", err)
	}
	plain := DefaultWorkloadConfig()
	plain.TxnSends = 0 // unused without Txn
	if err := plain.Validate(); err != nil {
		t.Fatalf("no txn, no txn sends: %v", err)
	}
	for name, mod := range map[string]func(*WorkloadConfig){
		"no sends":           func(c *WorkloadConfig) { c.TxnSends = 0 },
		"too many sends":     func(c *WorkloadConfig) { c.TxnSends = maxTxnSends + 1 },
		"acks leader":        func(c *WorkloadConfig) { c.Acks, c.Idempotent = AcksLeader, false },
		"not idempotent":     func(c *WorkloadConfig) { c.Idempotent = false },
		"read uncommitted":   func(c *WorkloadConfig) { c.ReadCommitted = false },
		"poll p above 1":     func(c *WorkloadConfig) { c.TxnPollP = 1.5 },
		"poll p below 0":     func(c *WorkloadConfig) { c.TxnPollP = -0.1 },
		"abort p above 1":    func(c *WorkloadConfig) { c.TxnAbortP = 2 },
		"abort p below 0":    func(c *WorkloadConfig) { c.TxnAbortP = -1 },
		"no txn, bad poll p": func(c *WorkloadConfig) { c.Txn = false; c.TxnPollP = 3 },
	} {
		c := txnConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v, want ErrBadConfig", name, err)
		}
	}
	c := txnConfig()
	c.TxnSends, c.TxnPollP, c.TxnAbortP = 1, 0, 1
	if err := c.Validate(); err != nil {
		t.Errorf("one send, never poll, always abort: %v", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testBinary != "" {
		os.RemoveAll(filepath.Dir(testBinary))
	}
	os.Exit(code)
}

func TestSetup_NamesTxnRuns(t *testing.T) {
	c := DefaultRaftqConfig()
	if s := c.setup().String(); strings.Contains(s, "txn") {
		t.Errorf("setup of a run without txns: %q", s)
	}
	c.Run.Workload.Txn = true
	if s := c.setup(); !s.Txn || !strings.Contains(s.String(), " txn=true") {
		t.Errorf("setup of a txn run: %+v %q", s, s.String())
	}
}

var (
	testBinaryOnce sync.Once
	testBinary     string
	testBinaryErr  error
)

// raftqBinary builds the raftq command once for the tests that run real
// nodes ($RAFTQ_TEST_BINARY names a built one instead).
func raftqBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real raftq processes; skipped with -short")
	}
	if b := os.Getenv("RAFTQ_TEST_BINARY"); b != "" {
		return b
	}
	testBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jepsen-raftq-bin-")
		if err != nil {
			testBinaryErr = err
			return
		}
		testBinary = filepath.Join(dir, "raftq")
		out, err := exec.Command("go", "build", "-o", testBinary, "github.com/raftq/raftq/cmd/raftq").CombinedOutput()
		if err != nil {
			testBinaryErr = errors.New("go build raftq: " + err.Error() + "\n" + string(out))
		}
	})
	if testBinaryErr != nil {
		t.Fatal(testBinaryErr)
	}
	return testBinary
}

// raftqCluster starts n real raftq nodes on the host's loopback (free
// ports, no namespace) and waits until they are healthy.
func raftqCluster(t *testing.T, n int) *chaos.Cluster {
	t.Helper()
	cfg := chaos.DefaultConfig()
	cfg.Binary, cfg.Nodes, cfg.Dir = raftqBinary(t), n, t.TempDir()
	cfg.Args = chaos.ServerArgs("jepsen-test", "always", "--tick-interval", "50ms")
	cfg.Ready = chaos.HTTPReady("/v1/status")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := chaos.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range c.Nodes() {
				if b, err := os.ReadFile(node.LogPath); err == nil {
					t.Logf("---- node %d log (tail) ----\n%s", node.ID, b[max(0, len(b)-3000):])
				}
			}
		}
		c.Close()
	})
	if err := c.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitHealthy(ctx, c, "", 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTxnWorkload_AgainstRaftq runs a short, count-bounded txn workload
// against three real raftq nodes and checks the history by hand, without
// the checkers: committed txns carry their offsets and the final reads
// return each of their records there; aborted txns are fail and no read
// returns their records; txn polls read records; every final read
// completes although each partition ends in commit or abort markers.
func TestTxnWorkload_AgainstRaftq(t *testing.T) {
	c := raftqCluster(t, 3)
	cfg := txnConfig()
	for _, n := range c.Nodes() {
		cfg.Brokers = append(cfg.Brokers, n.KafkaAddr())
	}
	cfg.ClientOpts = []kgo.Opt{kgo.Dialer(c.DialContext)}
	cfg.Topic, cfg.Partitions, cfg.ReplicationFactor = "jepsen-txn", 3, 3
	cfg.Producers, cfg.Consumers = 3, 1
	cfg.Rate, cfg.Burst = 200, 10
	cfg.OpLimit, cfg.Duration = 150, 15*time.Second
	cfg.OpTimeout, cfg.FetchMaxWait = 3*time.Second, 50*time.Millisecond
	cfg.ReassignEvery = 6
	cfg.TxnAbortP, cfg.TxnPollP = 0.3, 0.6
	cfg.FinalReadTimeout = 20 * time.Second

	rec := NewRecorder(nil)
	w, err := NewWorkload(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	w.FinalReads(ctx)
	t.Logf("workload and final reads took %s", time.Since(start))
	h := rec.History()
	if res, err := Check(h, DefaultCheckConfig()); err != nil {
		t.Logf("check (the checkers may not know txn ops yet): %v", err)
	} else {
		t.Logf("check: %s", res.Summary())
	}

	type at struct {
		p   int32
		off int64
	}
	var okTxns, failTxns, infoTxns, aborted, txnReads, finalOK int
	committed := map[string]at{} // value -> where its ok txn's send landed
	notCommitted := map[string]bool{}
	final := map[int32]PartitionRead{}
	for _, op := range h {
		switch {
		case op.F == FTxn && op.Type != Invoke:
			if op.Txn == nil || len(op.Txn.Sends) == 0 || op.Txn.ID == "" {
				t.Fatalf("txn op without its payload: %+v", op)
			}
			for _, r := range op.Reads {
				txnReads += len(r.Records)
			}
			switch op.Type {
			case OK:
				okTxns++
				if op.Txn.Abort || op.Txn.EndStart <= 0 || op.Txn.EndStart > op.Time {
					t.Errorf("ok txn %d: abort %v, end start %d at time %d", op.Index, op.Txn.Abort, op.Txn.EndStart, op.Time)
				}
				for _, s := range op.Txn.Sends {
					if s.Offset < 0 {
						t.Errorf("ok txn %d: send %s without an offset", op.Index, s.Value)
					}
					committed[s.Value] = at{s.Partition, s.Offset}
				}
			case Fail:
				failTxns++
				if op.Txn.Abort {
					aborted++
				}
				for _, s := range op.Txn.Sends {
					notCommitted[s.Value] = true
				}
			case Info:
				infoTxns++
			}
		case op.F == FFinalRead && op.Type == OK:
			finalOK++
			final[op.Reads[0].Partition] = op.Reads[0]
		}
	}
	for _, op := range h {
		if (op.F == FPoll || op.F == FTxn) && op.Type != Invoke {
			for _, r := range op.Reads {
				for _, rec := range r.Records {
					if notCommitted[rec.Value] {
						t.Errorf("%s %d read %s of a failed txn", op.F, op.Index, rec.Value)
					}
				}
			}
		}
	}
	t.Logf("txns: %d ok, %d fail (%d aborted on purpose), %d info; %d records read by txn polls; %d final reads ok",
		okTxns, failTxns, aborted, infoTxns, txnReads, finalOK)
	if okTxns == 0 || aborted == 0 || txnReads == 0 {
		t.Fatalf("want ok txns, aborted txns and txn reads with records")
	}
	if finalOK != int(cfg.Partitions) {
		t.Fatalf("%d of %d final reads complete", finalOK, cfg.Partitions)
	}
	seen := map[string]bool{}
	markers := 0
	for p, r := range final {
		for i, rec := range r.Records {
			seen[rec.Value] = true
			if notCommitted[rec.Value] {
				t.Errorf("final read of %d returned %s of a failed txn", p, rec.Value)
			}
			if w, ok := committed[rec.Value]; ok && (w.p != p || w.off != rec.Offset) {
				t.Errorf("final read of %d: %s at %d, its commit acknowledged %d/%d", p, rec.Value, rec.Offset, w.p, w.off)
			}
			if i > 0 && rec.Offset <= r.Records[i-1].Offset {
				t.Errorf("final read of %d: offset %d after %d", p, rec.Offset, r.Records[i-1].Offset)
			}
		}
		if n := len(r.Records); n > 0 && r.Records[n-1].Offset < r.HighWatermark-1 {
			markers++ // the read ended on control records, which it never returns
		}
	}
	for v, w := range committed {
		if !seen[v] {
			t.Errorf("committed %s at %d/%d: no final read returned it", v, w.p, w.off)
		}
	}
	if markers == 0 {
		t.Errorf("no partition's final read ended below hw-1: %+v", final)
	}
}

// TestTxn_Outcomes runs single transactions against kfake with faults
// on its requests and checks how each is classified.
func TestTxn_Outcomes(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := fakeWorkload(c)
	cfg.Txn, cfg.ReadCommitted = true, true
	cfg.Partitions, cfg.TxnSends = 2, 3
	cfg.OpTimeout = 2 * time.Second
	rec := NewRecorder(nil)
	w, err := NewWorkload(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	tr := &transactor{w: w, rng: w.rng(0), id: "jepsen-txn-0", cons: &consumer{w: w, next: map[int32]int64{}}}
	defer tr.close()
	if err := tr.open(); err != nil {
		t.Fatal(err)
	}
	last := func() Op { h := rec.History(); return h[len(h)-1] }
	run := func(name string, abort bool, want Type) Op {
		t.Helper()
		w.cfg.TxnAbortP = 0
		if abort {
			w.cfg.TxnAbortP = 1
		}
		if got := tr.txn(ctx, false); got != want {
			t.Fatalf("%s: %s (%s), want %s", name, got, last().Error, want)
		}
		op := last()
		if op.Type != want || op.F != FTxn || op.Txn.Abort != abort {
			t.Fatalf("%s: recorded %+v", name, op)
		}
		return op
	}

	op := run("commit", false, OK)
	for _, s := range op.Txn.Sends {
		if s.Offset < 0 {
			t.Errorf("commit: send %s without an offset", s.Value)
		}
	}
	if op.Txn.EndStart <= 0 || op.Txn.EndStart > op.Time {
		t.Errorf("commit: end start %d, completion at %d", op.Txn.EndStart, op.Time)
	}
	op = run("abort", true, Fail)
	if op.Txn.EndStart <= 0 || op.Txn.Sends[0].Offset < 0 {
		t.Errorf("abort: end start %d, sends %+v", op.Txn.EndStart, op.Txn.Sends)
	}

	// A send the broker rejects: the txn aborts and nothing commits.
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: 1})
	op = run("rejected send", false, Fail)
	h.Remove()
	if !strings.Contains(op.Error, "send") || op.Txn.EndStart <= 0 {
		t.Errorf("rejected send: error %q, end start %d", op.Error, op.Txn.EndStart)
	}

	// A commit whose answer is an unknown server error may have landed:
	// info, whatever the abort after it did.
	h = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1})
	op = run("commit unconfirmed", false, Info)
	h.Remove()
	if !strings.Contains(op.Error, "commit") {
		t.Errorf("commit unconfirmed: error %q", op.Error)
	}
}
