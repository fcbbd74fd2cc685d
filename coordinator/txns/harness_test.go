package txns

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/raftgroup"
)

const (
	t0      = int64(1_700_000_000_000) // the tests' epoch of wall-clock time
	maxTO   = int32(900_000)           // transaction.max.timeout.ms
	timeout = int32(60_000)
	week    = int64(7 * 24 * 3600 * 1000)
)

// harness applies commands to a machine as its raft group would, keeping
// the log for replay.
type harness struct {
	t   testing.TB
	m   *Machine
	log []raftgroup.Entry
	now int64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, m: NewMachine(), now: t0}
	h.ok(&Command{Barrier: &Barrier{Term: 1}})
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{Start: 1000, Count: 100}}})
	return h
}

func (h *harness) apply(c *Command) Result {
	h.t.Helper()
	data, err := c.Encode()
	if err != nil {
		h.t.Fatal(err)
	}
	e := raftgroup.Entry{Index: uint64(len(h.log) + 1), Term: 1, Data: data}
	h.log = append(h.log, e)
	v, err := h.m.Apply(e)
	if err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	r, ok := v.(Result)
	if !ok {
		h.t.Fatalf("apply returned %T", v)
	}
	return r
}

func (h *harness) ok(c *Command) Result {
	h.t.Helper()
	r := h.apply(c)
	if r.Code != 0 {
		h.t.Fatalf("%s: code %d", kerr.ErrorForCode(r.Code), r.Code)
	}
	return r
}

func (h *harness) init(id string) Result {
	h.t.Helper()
	return h.apply(&Command{InitProducerID: &InitProducerID{TransactionalID: id, TimeoutMs: timeout, MaxTimeoutMs: maxTO,
		ProducerID: -1, ProducerEpoch: -1, NowMs: h.now}})
}

// initAs is a KIP-360 InitProducerId presenting pid and epoch.
func (h *harness) initAs(id string, pid int64, epoch int16) Result {
	h.t.Helper()
	return h.apply(&Command{InitProducerID: &InitProducerID{TransactionalID: id, TimeoutMs: timeout, MaxTimeoutMs: maxTO,
		ProducerID: pid, ProducerEpoch: epoch, NowMs: h.now}})
}

func (h *harness) add(id string, pid int64, epoch int16, parts Partitions) TxnResult {
	h.t.Helper()
	r := h.apply(&Command{AddPartitions: &AddPartitions{NowMs: h.now,
		Txns: []AddTxn{{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: parts}}}})
	if len(r.Txns) != 1 {
		h.t.Fatalf("AddPartitions answered %d transactions", len(r.Txns))
	}
	return r.Txns[0]
}

func (h *harness) verify(id string, pid int64, epoch int16, parts Partitions) TxnResult {
	h.t.Helper()
	r := h.apply(&Command{AddPartitions: &AddPartitions{NowMs: h.now,
		Txns: []AddTxn{{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: true, Partitions: parts}}}})
	return r.Txns[0]
}

func (h *harness) addOffsets(id string, pid int64, epoch int16, group string) int16 {
	h.t.Helper()
	return h.apply(&Command{AddOffsets: &AddOffsets{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Group: group, NowMs: h.now}}).Code
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool) int16 {
	h.t.Helper()
	return h.apply(&Command{EndTxn: &EndTxn{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: commit, NowMs: h.now}}).Code
}

// finish writes every pending marker of id, as the host does.
func (h *harness) finish(id string) int16 {
	h.t.Helper()
	for _, p := range h.m.Pending() {
		if p.TransactionalID == id {
			return h.apply(&Command{MarkersWritten: &MarkersWritten{TransactionalID: id, ProducerID: p.ProducerID,
				ProducerEpoch: p.ProducerEpoch, Commit: p.Commit, Partitions: p.Partitions, Groups: p.Groups, NowMs: h.now}}).Code
		}
	}
	h.t.Fatalf("%s has no pending markers", id)
	return 0
}

func (h *harness) tick(expirationMs int64) Result {
	h.t.Helper()
	return h.ok(&Command{Tick: &Tick{NowMs: h.now, ExpirationMs: expirationMs}})
}

// producer runs InitProducerId for id and returns its producer id and
// epoch.
func (h *harness) producer(id string) (int64, int16) {
	h.t.Helper()
	r := h.init(id)
	if r.Code != 0 {
		h.t.Fatalf("init %s: code %d", id, r.Code)
	}
	return r.ProducerID, r.ProducerEpoch
}

// ongoing opens a transaction of id on t-0 and t-1 and returns its
// producer id and epoch.
func (h *harness) ongoing(id string) (int64, int16) {
	h.t.Helper()
	pid, epoch := h.producer(id)
	if r := h.add(id, pid, epoch, Partitions{"t": {1, 0}}); r.Code != 0 {
		h.t.Fatalf("add: code %d", r.Code)
	}
	return pid, epoch
}

// seed stores t as it is, to reach states (exhausted epochs) that would
// take thousands of commands.
func (h *harness) seed(t *Txn) {
	h.m.mu.Lock()
	h.m.st.txns[t.ID] = t
	h.m.mu.Unlock()
}

func (h *harness) txn(id string) *Txn {
	h.t.Helper()
	t := h.m.Txn(id)
	if t == nil {
		h.t.Fatalf("no transactional id %s", id)
	}
	return t
}

func (h *harness) snapshot() string {
	h.t.Helper()
	b, err := h.m.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: code %s, want %s", what, codeName(got), codeName(w))
	}
}
