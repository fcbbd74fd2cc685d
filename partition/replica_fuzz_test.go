package partition

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/raftq/raftq/raftgroup"
)

// fuzzEntries packs entries as a fuzz input: per entry a term byte, a
// two-byte length and the entry's data.
func fuzzEntries(terms []byte, entries ...[]byte) []byte {
	var b []byte
	for i, e := range entries {
		b = append(b, terms[i%len(terms)], byte(len(e)>>8), byte(len(e)))
		b = append(b, e...)
	}
	return b
}

// fuzzOp is what the second replica does after an entry.
type fuzzOp byte

const (
	opNone     fuzzOp = iota
	opSnapshot        // checkpoint, as a raft snapshot does
	opRestart         // close, reopen at the checkpoint, replay the rest
	opShrink          // tiny segment and batch limits, as an altered topic config sets them
)

func unpackEntries(b []byte) (terms []uint64, ops []fuzzOp, entries [][]byte) {
	for len(b) >= 3 {
		n := min(int(b[1])<<8|int(b[2]), len(b)-3)
		terms = append(terms, uint64(b[0]%4)+1)
		ops = append(ops, fuzzOp(b[0]>>2%4))
		entries = append(entries, b[3:3+n])
		b = b[3+n:]
	}
	return terms, ops, entries
}

// FuzzReplicaApply applies arbitrary committed entries to two replicas,
// as two nodes of one raft group would; the second also takes snapshots,
// restarts (replaying from its checkpoint) and has its limits cut to the
// smallest (as an altered topic config does, at a moment of its own),
// where the input says.
// Neither may panic; they must agree on each entry's outcome (replays
// included) and end with the same records, start, high watermark and
// epochs.
func FuzzReplicaApply(f *testing.F) {
	ok := plainBatch(f, "a", "b")
	idem := idemBatch(f, 7, 0, 0, "x")
	snap, restart, shrink := byte(opSnapshot)<<2, byte(opRestart)<<2, byte(opShrink)<<2
	f.Add(fuzzEntries([]byte{1}, nil, produceEntry(ok), produceEntry(idem), produceEntry(idem), AdvanceStartEntry(1)))
	f.Add(fuzzEntries([]byte{1, 2 | snap, 1 | restart}, produceEntry(ok), AdvanceStartEntry(9), produceEntry(idemBatch(f, 7, 0, 5, "y"))))
	f.Add(fuzzEntries([]byte{3}, produceEntry(ok[:len(ok)-3]), []byte{kindAdvanceStart, 1}, []byte{9}))
	f.Add(fuzzEntries([]byte{1, 1 | snap, 1, 1 | restart}, nil, produceEntry(ok), produceEntry(idem), AdvanceStartEntry(3)))
	f.Add(fuzzEntries([]byte{1 | shrink, 1, 1}, nil, produceEntry(ok), produceEntry(idem)))
	// Transactions: open ones across a start move, a snapshot and a
	// restart; an abort, a commit, a fenced marker and a stray one.
	t1, t2 := txnBatch(f, 4, 0, 0, "t"), txnBatch(f, 5, 1, 0, "u")
	f.Add(fuzzEntries([]byte{1, 1, 1, 1 | snap, 1, 1 | restart, 1, 1, 1},
		produceEntry(t1), produceEntry(t2), produceEntry(ok), AdvanceStartEntry(3), produceEntry(abortMarker(4, 0)),
		produceEntry(abortMarker(5, 0)), produceEntry(commitMarker(5, 1)), produceEntry(commitMarker(6, 0)), produceEntry(t1)))
	f.Add(fuzzEntries([]byte{2, 2 | restart, 2 | snap, 2 | restart}, produceEntry(t1), AdvanceStartEntry(1), produceEntry(ok), produceEntry(abortMarker(4, 0))))
	f.Add(fuzzEntries([]byte{1 | snap, 1, 1 | restart, 1}, produceEntry(t1), produceEntry(ok), AdvanceStartEntry(3), produceEntry(abortMarker(4, 0))))
	f.Fuzz(func(t *testing.T, in []byte) {
		terms, ops, entries := unpackEntries(in)
		if len(entries) > 64 || !allValidated(entries) {
			return
		}
		a, b := newReplicaHarness(t), newReplicaHarness(t)
		var results []any
		for i, data := range entries {
			e := raftgroup.Entry{Index: uint64(i + 1), Term: terms[i], Data: data}
			ra, errA := a.r.Apply(e)
			rb, errB := b.r.Apply(e)
			if (errA == nil) != (errB == nil) || !reflect.DeepEqual(ra, rb) {
				t.Fatalf("entry %d: replicas disagree: %v %+v / %v %+v", i+1, errA, ra, errB, rb)
			}
			if errA != nil {
				entries = entries[:i]
				break // a node stops at an entry it cannot apply
			}
			results = append(results, ra)
			switch ops[i] {
			case opSnapshot:
				if _, err := b.r.Snapshot(); err != nil {
					t.Fatalf("snapshot after entry %d: %v", i+1, err)
				}
			case opShrink:
				lim := b.r.Log().Limits()
				lim.SegmentBytes, lim.MaxBatchBytes = BatchHeaderSize, BatchHeaderSize
				if err := b.r.Log().SetLimits(lim); err != nil {
					t.Fatal(err)
				}
			case opRestart:
				restartAndReplay(t, b, terms, entries[:i+1], results)
			}
		}
		want := replicaImage(t, a.r)
		if got := replicaImage(t, b.r); !reflect.DeepEqual(got, want) {
			t.Fatalf("replicas differ:\n%+v\n%+v", got, want)
		}
	})
}

// allValidated reports whether every produce entry that apply would
// append carries a batch ValidateBatch accepts. The leader validates each
// batch before proposing it, so a committed one always passes, and a
// replica's recovery (which checks CRCs) would rightly cut one that did
// not. Entries whose header does not even parse stay: apply refuses them
// alike on every replica.
func allValidated(entries [][]byte) bool {
	for _, e := range entries {
		if len(e) == 0 || e[0] != kindProduce {
			continue
		}
		if _, err := ParseBatchHeader(e[1:]); err != nil {
			continue
		}
		if _, err := ValidateBatch(e[1:], math.MaxInt32); err != nil {
			return false
		}
	}
	return true
}

// restartAndReplay closes h's replica, reopens it at its checkpoint and
// applies the entries after it again, as raft would replay them; each
// must give the result it gave the first time, but for the log start it
// reports: a log restarted at the checkpoint's end (its start had moved
// past it) starts there until the replay moves it again, and nobody waits
// for a replayed entry's result.
func restartAndReplay(t *testing.T, h *replicaHarness, terms []uint64, entries [][]byte, results []any) {
	t.Helper()
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	h.open()
	for i := h.r.Applied(); i < uint64(len(entries)); i++ {
		res, err := h.r.Apply(raftgroup.Entry{Index: i + 1, Term: terms[i], Data: entries[i]})
		pr, ok1 := res.(*ProduceResult)
		if want, ok2 := results[i].(*ProduceResult); ok1 && ok2 && pr != nil && want != nil {
			pr.LogStart = want.LogStart
		}
		if err != nil || !reflect.DeepEqual(res, results[i]) {
			t.Fatalf("replay of entry %d after a restart: %v %+v, first time %+v", i+1, err, res, results[i])
		}
	}
}

// image is what two replicas of one log must share.
type image struct {
	start, end, hw int64
	applied        uint64
	log            []byte
	epochs         []EpochStart
	txns           txnView
}

func replicaImage(t *testing.T, r *Replica) image {
	t.Helper()
	l := r.Log()
	var log bytes.Buffer
	for _, b := range readAll(t, l) {
		log.Write(b)
	}
	return image{start: l.StartOffset(), end: l.EndOffset(), hw: l.HighWatermark(), applied: r.Applied(), log: log.Bytes(), epochs: r.Epochs(), txns: viewTxns(l)}
}
