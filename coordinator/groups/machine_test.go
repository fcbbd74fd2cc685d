package groups

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/raftgroup"
)

// busyHistory runs a scenario touching every command kind and returns the
// harness with its log.
func busyHistory(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	h.commit("g", ids[0], gen, 10)
	h.commit("s", "", -1, 4)
	req := joinReq("st", "", "i-1")
	j := h.join(req)
	h.clk.advance(h.c.cfg.InitialRebalanceDelay)
	h.c.Tick()
	r := j.wait(t)
	h.sync("st", r.MemberID, r.Generation, map[string]string{r.MemberID: "x"}).wait(t)
	h.join(joinReq("st", "", "i-1")).wait(t) // ReplaceStatic
	h.c.DeleteOffsets("s", []TopicPartition{{"t", 0}})
	h.commit("d", "", -1, 1)
	h.c.DeleteGroups([]string{"d"})
	h.commit("e", "", -1, 1)
	h.txnCommit("tx", 7, 0, "", -1, map[int32]int64{0: 3})
	h.txnCommit("tx", 8, 1, "", -1, map[int32]int64{0: 4, 1: 2})
	h.c.TxnMarker(7, 0, true)
	h.clk.advance(8 * 24 * 3600e9)
	h.c.cfg.ExpireInterval = 1
	h.c.Tick() // sessions expire (Remove) and offsets of empty groups expire
	return h
}

func TestMachine_SnapshotRoundTripAndDeterminism(t *testing.T) {
	h := busyHistory(t)
	want := h.snapshot()
	kinds := map[string]bool{}
	for _, e := range h.log.entries {
		c, err := DecodeCommand(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		for name, set := range map[string]bool{"barrier": c.Barrier != nil, "newgen": c.NewGeneration != nil,
			"assign": c.Assign != nil, "remove": c.Remove != nil, "static": c.ReplaceStatic != nil, "commit": c.Commit != nil,
			"deloffsets": c.DeleteOffsets != nil, "delgroups": c.DeleteGroups != nil, "expire": c.Expire != nil} {
			kinds[name] = kinds[name] || set
		}
	}
	if len(kinds) != 9 {
		t.Fatalf("history lacks command kinds: %v", kinds)
	}
	for k, v := range kinds {
		if !v {
			t.Errorf("history has no %s command", k)
		}
	}
	// Replaying the log on a fresh replica gives byte-identical state.
	replay := NewMachine()
	mid := len(h.log.entries) / 2
	var midSnap []byte
	for i, e := range h.log.entries {
		if _, err := replay.Apply(e); err != nil {
			t.Fatal(err)
		}
		if i == mid {
			midSnap, _ = replay.Snapshot()
		}
	}
	if got, _ := replay.Snapshot(); string(got) != want {
		t.Fatalf("replayed state differs:\n%s\nwant\n%s", got, want)
	}
	// Restoring a snapshot taken mid-log and applying the rest agrees too.
	restored := NewMachine()
	snap := &raftpb.Snapshot{Data: midSnap, Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(uint64(mid + 1))}}
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if again, _ := restored.Snapshot(); !bytes.Equal(again, midSnap) {
		t.Fatal("snapshot -> restore -> snapshot is not the identity")
	}
	for _, e := range h.log.entries[mid+1:] {
		if _, err := restored.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := restored.Snapshot(); string(got) != want {
		t.Fatalf("restored+applied state differs:\n%s\nwant\n%s", got, want)
	}
}

func TestMachine_ForeignEntriesChangeNothing(t *testing.T) {
	m := NewMachine()
	before, _ := m.Snapshot()
	for _, data := range [][]byte{{1, 0, 0, 0}, []byte("G{"), []byte(`G{}`), []byte(`G{"barrier":{},"expire":{}}`)} {
		v, err := m.Apply(raftgroup.Entry{Index: 1, Data: data})
		if err != nil {
			t.Fatalf("apply %q: %v", data, err)
		}
		if r, ok := v.(Result); !ok || r.Code != kerr.InvalidRequest.Code {
			t.Fatalf("apply %q = %v, want INVALID_REQUEST", data, v)
		}
	}
	if v, err := m.Apply(raftgroup.Entry{Index: 2}); v != nil || err != nil {
		t.Fatalf("no-op entry: %v %v", v, err)
	}
	if after, _ := m.Snapshot(); !bytes.Equal(before, after) {
		t.Fatal("foreign entries changed the state")
	}
}

func TestDecodeCommand_Errors(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("{}"), []byte("Gnot json"), []byte(`G{"commit":{},"assign":{}}`)} {
		if _, err := DecodeCommand(b); !errors.Is(err, ErrNotCommand) {
			t.Errorf("DecodeCommand(%q) = %v, want ErrNotCommand", b, err)
		}
	}
	c := &Command{Commit: &Commit{Group: "g", Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 1}, Offset: 9}}}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(b)
	if err != nil || got.Commit.Offsets[0].Offset != 9 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []*Command{
		{Barrier: &Barrier{Term: 3}},
		{Commit: &Commit{Group: "g", Generation: -1, Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 0}, Offset: 1}}}},
		{NewGeneration: &NewGeneration{Group: "g", Generation: 1, Members: []*Member{{ID: "m", Protocols: []Protocol{{Name: "range"}}}}}},
		{Remove: &Remove{Group: "g", Members: []string{"m"}}},
	} {
		b, _ := c.Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := NewMachine()
		c, err := DecodeCommand(b)
		if _, aerr := m.Apply(raftgroup.Entry{Index: 1, Data: b}); aerr != nil {
			t.Fatalf("apply never fails: %v", aerr)
		}
		if err != nil {
			return
		}
		// Whatever decodes applies, snapshots and restores consistently.
		snap, serr := m.Snapshot()
		if serr != nil {
			t.Fatal(serr)
		}
		r := NewMachine()
		if err := r.Restore(&raftpb.Snapshot{Data: snap}); err != nil {
			t.Fatalf("restore own snapshot: %v", err)
		}
		if again, _ := r.Snapshot(); !bytes.Equal(again, snap) {
			t.Fatalf("snapshot round trip differs for %+v", c)
		}
	})
}

func FuzzRestore(f *testing.F) {
	seed := NewMachine()
	c, _ := (&Command{Commit: &Commit{Group: "s", Generation: -1, Offsets: []CommitOffset{{Offset: 4}}}}).Encode()
	if _, err := seed.Apply(raftgroup.Entry{Index: 1, Data: c}); err != nil {
		f.Fatal(err)
	}
	snap, _ := seed.Snapshot()
	f.Add(snap)
	f.Add([]byte(`{"groups":{"g":null}}`))
	f.Add([]byte(`{"groups":{"g":{"members":{"m":null}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := NewMachine()
		if err := m.Restore(&raftpb.Snapshot{Data: b}); err != nil {
			return
		}
		// A restored state serves reads and new commands without panics.
		m.Groups()
		c := &Command{Commit: &Commit{Group: "g", Generation: -1, Offsets: []CommitOffset{{Offset: 1}}}}
		data, _ := c.Encode()
		if _, err := m.Apply(raftgroup.Entry{Index: 1, Data: data}); err != nil {
			t.Fatal(err)
		}
		e, _ := (&Command{Expire: &Expire{NowMs: 1 << 50, RetentionMs: 1}}).Encode()
		if _, err := m.Apply(raftgroup.Entry{Index: 2, Data: e}); err != nil {
			t.Fatal(err)
		}
	})
}
