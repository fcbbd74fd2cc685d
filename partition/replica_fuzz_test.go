package partition

import (
	"bytes"
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

func unpackEntries(b []byte) (terms []uint64, entries [][]byte) {
	for len(b) >= 3 {
		n := min(int(b[1])<<8|int(b[2]), len(b)-3)
		terms = append(terms, uint64(b[0]%4)+1)
		entries = append(entries, b[3:3+n])
		b = b[3+n:]
	}
	return terms, entries
}

// FuzzReplicaApply applies arbitrary committed entries to two replicas,
// as two nodes of one raft group would. Neither may panic; they must agree
// on each entry's outcome and end with the same log, high watermark and
// producer state; and a replica reopened from its files must come back to
// where it stopped.
func FuzzReplicaApply(f *testing.F) {
	ok := plainBatch(f, "a", "b")
	idem := idemBatch(f, 7, 0, 0, "x")
	f.Add(fuzzEntries([]byte{1}, nil, ProduceEntry(ok), ProduceEntry(idem), ProduceEntry(idem), AdvanceStartEntry(1)))
	f.Add(fuzzEntries([]byte{1, 2}, ProduceEntry(ok), AdvanceStartEntry(9), ProduceEntry(idemBatch(f, 7, 0, 5, "y"))))
	f.Add(fuzzEntries([]byte{3}, ProduceEntry(ok[:len(ok)-3]), []byte{kindAdvanceStart, 1}, []byte{9}))
	f.Fuzz(func(t *testing.T, in []byte) {
		terms, entries := unpackEntries(in)
		if len(entries) > 64 {
			return
		}
		a, b := newReplicaHarness(t), newReplicaHarness(t)
		for i, data := range entries {
			e := raftgroup.Entry{Index: uint64(i + 1), Term: terms[i], Data: data}
			ra, errA := a.r.Apply(e)
			rb, errB := b.r.Apply(e)
			if (errA == nil) != (errB == nil) || !reflect.DeepEqual(ra, rb) {
				t.Fatalf("entry %d: replicas disagree: %v %+v / %v %+v", i+1, errA, ra, errB, rb)
			}
			if errA != nil {
				break // a node stops at an entry it cannot apply
			}
		}
		want := replicaImage(t, a.r)
		if got := replicaImage(t, b.r); !reflect.DeepEqual(got, want) {
			t.Fatalf("replicas differ:\n%+v\n%+v", got, want)
		}
		if err := a.r.Close(); err != nil {
			t.Fatal(err)
		}
		a.open()
		if got := replicaImage(t, a.r); got.end > want.end || got.applied > want.applied || !bytes.HasPrefix(want.log, got.log) {
			t.Fatalf("reopened past where it stopped: %+v, was %+v", got, want)
		}
	})
}

// image is what two replicas of one log must share.
type image struct {
	start, end, hw int64
	applied        uint64
	log            []byte
	epochs         []EpochStart
}

func replicaImage(t *testing.T, r *Replica) image {
	t.Helper()
	l := r.Log()
	var log bytes.Buffer
	for _, b := range readAll(t, l) {
		log.Write(b)
	}
	return image{start: l.StartOffset(), end: l.EndOffset(), hw: l.HighWatermark(), applied: r.Applied(), log: log.Bytes(), epochs: r.Epochs()}
}
