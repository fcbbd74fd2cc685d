package txns

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// busyHistory runs a scenario touching every command kind and most
// transitions, and returns the harness with its log.
func busyHistory(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	pa, ea := h.ongoing("a")
	h.addOffsets("a", pa, ea, "g")
	h.verify("a", pa, ea, Partitions{"t": {0, 5}})
	h.end("a", pa, ea, true)
	h.apply(&Command{MarkersWritten: &MarkersWritten{TransactionalID: "a", ProducerID: pa, ProducerEpoch: ea, Commit: true,
		Partitions: Partitions{"t": {0}}, NowMs: h.now}})
	h.finish("a")
	h.end("a", pa, ea, true) // a retry after completion
	pb, eb := h.ongoing("b")
	h.now += 5
	h.init("b") // fences b's zombie
	h.add("b", pb, eb, Partitions{"t": {3}})
	h.finish("b")
	h.producer("b")
	h.initAs("b", pb, eb+2)
	h.ongoing("c")
	h.producer("d")
	h.now += int64(timeout) + 1
	h.tick(week) // aborts c
	h.finish("c")
	h.apply(&Command{Barrier: &Barrier{Term: 2}})
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{Start: 7000, Count: 5}}})
	h.now += week
	h.tick(week) // expires the idle ones
	h.ongoing("e")
	return h
}

func TestMachine_ReplayAndSnapshotDeterminism(t *testing.T) {
	h := busyHistory(t)
	want := h.snapshot()
	kinds := map[string]bool{}
	for _, e := range h.log {
		c, err := DecodeCommand(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		for name, set := range map[string]bool{"barrier": c.Barrier != nil, "grant": c.GrantProducerIDs != nil,
			"init": c.InitProducerID != nil, "add": c.AddPartitions != nil, "offsets": c.AddOffsets != nil,
			"end": c.EndTxn != nil, "markers": c.MarkersWritten != nil, "tick": c.Tick != nil} {
			kinds[name] = kinds[name] || set
		}
	}
	for k, v := range kinds {
		if !v {
			t.Errorf("history has no %s command", k)
		}
	}
	if len(kinds) != 8 {
		t.Fatalf("history kinds: %v", kinds)
	}
	// The log replayed on a fresh replica gives byte-identical state and
	// the same results.
	replay := NewMachine()
	var results []any
	for _, e := range h.log {
		r, err := replay.Apply(e)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	if got := snapshotOf(t, replay); string(got) != want {
		t.Fatalf("replayed state differs:\n%s\nwant\n%s", got, want)
	}
	// A replica restarting from a snapshot at any point, then applying the
	// rest, ends in the same state with the same results.
	for cut := range h.log {
		a := NewMachine()
		for _, e := range h.log[:cut] {
			_, _ = a.Apply(e)
		}
		b := NewMachine()
		if err := b.Restore(&raftpb.Snapshot{Data: snapshotOf(t, a)}); err != nil {
			t.Fatalf("restore at %d: %v", cut, err)
		}
		if !bytes.Equal(snapshotOf(t, b), snapshotOf(t, a)) {
			t.Fatalf("snapshot at %d does not round-trip", cut)
		}
		for i, e := range h.log[cut:] {
			r, _ := b.Apply(e)
			if !reflect.DeepEqual(r, results[cut+i]) {
				t.Fatalf("after a restart at %d, entry %d answered %+v, want %+v", cut, cut+i+1, r, results[cut+i])
			}
		}
		if got := snapshotOf(t, b); string(got) != want {
			t.Fatalf("restarted at %d, the state differs:\n%s\nwant\n%s", cut, got, want)
		}
	}
}

// TestMachine_FailoverResumesMarkers: a follower that saw the log up to
// an EndTxn knows, once it leads, which markers to write, and completes
// the transaction; the old leader's late report changes nothing.
func TestMachine_FailoverResumesMarkers(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.ongoing("a")
	h.addOffsets("a", pid, epoch, "g")
	h.end("a", pid, epoch, true)
	follower := NewMachine()
	for _, e := range h.log {
		_, _ = follower.Apply(e)
	}
	pending := follower.Pending()
	if !reflect.DeepEqual(pending, h.m.Pending()) || len(pending) != 1 {
		t.Fatalf("the follower's pending %+v, the leader's %+v", pending, h.m.Pending())
	}
	p := pending[0]
	if !p.Commit || p.ProducerID != pid || p.ProducerEpoch != epoch ||
		!reflect.DeepEqual(p.Partitions, Partitions{"t": {0, 1}}) || !reflect.DeepEqual(p.Groups, []string{"g"}) {
		t.Fatalf("pending: %+v", p)
	}
	nl := &harness{t: t, m: follower, log: h.log, now: h.now + 1}
	nl.ok(&Command{Barrier: &Barrier{Term: 2}})
	if follower.CoordinatorEpoch() != 2 {
		t.Fatal("the new leader's barrier did not set the coordinator epoch")
	}
	wantCode(t, "new leader's markers", nl.finish("a"), nil)
	if tx := follower.Txn("a"); tx.State != StateCompleteCommit {
		t.Fatalf("after the new leader's markers: %+v", tx)
	}
	before := nl.snapshot()
	late := &Command{MarkersWritten: &MarkersWritten{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Commit: true,
		Partitions: p.Partitions, Groups: p.Groups, NowMs: h.now}}
	if r := nl.apply(late); r.Code == 0 || nl.snapshot() != before {
		t.Fatalf("a deposed leader's late report: %+v, state changed %v", r, nl.snapshot() != before)
	}
	// The client's retried EndTxn is answered as done.
	wantCode(t, "retried commit", nl.end("a", pid, epoch, true), nil)
}

func snapshotOf(t *testing.T, m *Machine) []byte {
	t.Helper()
	b, err := m.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}

// seedLog is busyHistory's log as lines of command JSON (without the
// prefix), for the fuzzers' corpus.
func seedLog(f *testing.F) []string {
	h := busyHistory(f)
	var out []string
	for _, e := range h.log {
		out = append(out, string(e.Data[1:]))
	}
	return out
}

// FuzzMachineApplyLog applies an arbitrary log to two replicas, and to a
// third that restarts from a snapshot at entry cut. Apply never fails or
// panics; the replicas agree on every result and end in the same state,
// snapshot for snapshot.
func FuzzMachineApplyLog(f *testing.F) {
	seed := seedLog(f)
	f.Add([]byte(strings.Join(seed, "\n")), uint8(7))
	f.Add([]byte(strings.Join(seed[:6], "\n")+"\n{}\nnot json\n"+seed[6]), uint8(2))
	f.Fuzz(func(t *testing.T, log []byte, cut uint8) {
		lines := bytes.Split(log, []byte("\n"))
		if len(lines) > 200 {
			return
		}
		a, b, c := NewMachine(), NewMachine(), NewMachine()
		for i, line := range lines {
			e := raftgroup.Entry{Index: uint64(i + 1), Term: 1, Data: append([]byte{commandMagic}, line...)}
			ra, errA := a.Apply(e)
			rb, errB := b.Apply(e)
			if errA != nil || errB != nil || !reflect.DeepEqual(ra, rb) {
				t.Fatalf("entry %d: %v %+v / %v %+v", i+1, errA, ra, errB, rb)
			}
			if i == int(cut) {
				c = NewMachine()
				if err := c.Restore(&raftpb.Snapshot{Data: snapshotOf(t, a)}); err != nil {
					t.Fatalf("restore a snapshot just taken: %v", err)
				}
				continue
			}
			if rc, err := c.Apply(e); err != nil || i > int(cut) && !reflect.DeepEqual(rc, ra) {
				t.Fatalf("entry %d after the restart: %v %+v, want %+v", i+1, err, rc, ra)
			}
		}
		want := snapshotOf(t, a)
		if got := snapshotOf(t, b); !bytes.Equal(got, want) {
			t.Fatalf("replicas differ:\n%s\n%s", got, want)
		}
		if int(cut) < len(lines) {
			if got := snapshotOf(t, c); !bytes.Equal(got, want) {
				t.Fatalf("the replica restarted from a snapshot differs:\n%s\n%s", got, want)
			}
		}
	})
}

// FuzzDecodeCommand: the decoder never panics, and whatever it accepts
// encodes to bytes that decode and encode to themselves (a proposal
// means the same on every replica, however often it is re-encoded).
func FuzzDecodeCommand(f *testing.F) {
	for _, line := range seedLog(f) {
		f.Add(append([]byte{commandMagic}, line...))
	}
	f.Add([]byte("T{}"))
	f.Add([]byte("G{\"barrier\":{}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		b, err := c.Encode()
		if err != nil {
			t.Fatalf("encode a decoded command: %v", err)
		}
		c2, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("decode an encoded command %q: %v", b, err)
		}
		if b2, _ := c2.Encode(); !bytes.Equal(b2, b) {
			t.Fatalf("re-encoded %q, want %q", b2, b)
		}
	})
}
