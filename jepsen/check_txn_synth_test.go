package jepsen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// txnSynth simulates a correct Kafka with transactions and the txn
// processes of a run: each txn polls its process's read_committed
// consumer (up to the last stable offset, committed records only), sends
// a few records (each appended at once), then commits or aborts, which
// writes a marker to every partition it wrote. Processes interleave step
// by step, so txns run concurrently.
type txnSynth struct {
	rng   *rand.Rand
	b     hb
	parts int32
	logs  map[int32][]synthEntry
	procs map[int]*synthTxn
	pos   map[int]map[int32]int64
	n     int
}

type synthEntry struct {
	value string
	txn   int // owner txn id; -1 for a marker
	state Type
}

type synthTxn struct {
	id    int
	inv   Op
	ws    []tw
	sent  int
	polls bool
	reads []PartitionRead
	abort bool
}

func newTxnSynth(seed uint64, parts int32) *txnSynth {
	return &txnSynth{
		rng: rand.New(rand.NewPCG(seed, 2)), parts: parts, logs: map[int32][]synthEntry{},
		procs: map[int]*synthTxn{}, pos: map[int]map[int32]int64{},
	}
}

// lso is the first offset of p holding an open txn's record, else its end.
func (s *txnSynth) lso(p int32) int64 {
	for o, e := range s.logs[p] {
		if e.state == Invoke {
			return int64(o)
		}
	}
	return int64(len(s.logs[p]))
}

func (s *txnSynth) history(procs, steps int) History {
	for range steps {
		proc := s.rng.IntN(procs)
		t := s.procs[proc]
		switch {
		case t == nil:
			s.begin(proc)
		case !t.polls:
			s.poll(proc, t)
		case t.sent < len(t.ws):
			s.send(t)
		default:
			s.end(proc, t)
		}
	}
	for proc := range procs {
		if t := s.procs[proc]; t != nil {
			for t.sent < len(t.ws) {
				s.send(t)
			}
			s.end(proc, t)
		}
	}
	for p := range s.parts {
		var kv []any
		for o, e := range s.logs[p] {
			if e.state == OK && e.txn >= 0 {
				kv = append(kv, o, e.value)
			}
		}
		s.b.final(1000+int(p), p, OK, int64(len(s.logs[p])), kv...)
	}
	return s.b.h
}

func (s *txnSynth) begin(proc int) {
	if s.pos[proc] == nil {
		s.pos[proc] = map[int32]int64{}
		var seeks []Seek
		for p := range s.parts {
			seeks = append(seeks, seek(p, 0))
		}
		s.b.assign(proc, seeks...)
	}
	t := &synthTxn{id: s.n, abort: s.rng.IntN(5) == 0}
	for range 1 + s.rng.IntN(3) {
		t.ws = append(t.ws, w(s.rng.Int32N(s.parts), fmt.Sprintf("p%d-%06d", proc, s.n), NoOffset))
		s.n++
	}
	t.inv = s.b.txnInv(proc, t.ws...)
	t.polls = s.rng.IntN(3) == 0 // some txns do not poll
	s.procs[proc] = t
}

func (s *txnSynth) poll(proc int, t *synthTxn) {
	t.polls = true
	for p := range s.parts {
		lso, from := s.lso(p), s.pos[proc][p]
		limit := 1 + s.rng.IntN(4)
		r := part(p, int64(len(s.logs[p])))
		o := from
		for ; o < lso && len(r.Records) < limit; o++ {
			if e := s.logs[p][o]; e.state == OK && e.txn >= 0 {
				r.Records = append(r.Records, Record{Offset: o, Value: e.value})
			}
		}
		s.pos[proc][p] = o
		if len(r.Records) > 0 {
			t.reads = append(t.reads, r)
		}
	}
}

func (s *txnSynth) send(t *synthTxn) {
	x := &t.ws[t.sent]
	x.off = int64(len(s.logs[x.p]))
	s.logs[x.p] = append(s.logs[x.p], synthEntry{x.v, t.id, Invoke})
	t.sent++
}

func (s *txnSynth) end(proc int, t *synthTxn) {
	state := OK
	if t.abort {
		state = Fail
	}
	wrote := map[int32]bool{}
	for _, x := range t.ws {
		e := &s.logs[x.p][x.off]
		e.state = state
		if !wrote[x.p] {
			wrote[x.p] = true
		}
	}
	for p := range s.parts {
		if wrote[p] {
			s.logs[p] = append(s.logs[p], synthEntry{"", -1, OK})
		}
	}
	s.b.txnDone(t.inv, state, endNow, t.ws, t.reads...)
	delete(s.procs, proc)
}

func TestCheckTxn_SimulatedCorrectKafkaIsValid(t *testing.T) {
	cycles := 0
	for seed := range uint64(30) {
		h := newTxnSynth(seed, 3).history(6, 2500)
		cfg := DefaultCheckConfig()
		cfg.Allowed = []string{CheckG0, CheckG1c}
		res, err := Check(h, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Valid || res.Verdict != VerdictOK {
			for _, c := range res.Checkers {
				if c.Verdict != VerdictOK && !c.Allowed {
					t.Errorf("seed %d: %s %+v", seed, c.Name, c.Examples)
				}
			}
			t.Fatalf("seed %d: %s", seed, res.Summary())
		}
		if res.Stats.ByF[FTxn][Fail] == 0 || res.Stats.ByF[FTxn][OK] == 0 {
			t.Fatalf("seed %d: no commits or no aborts: %v", seed, res.Stats.ByF[FTxn])
		}
		cycles += res.Checker(CheckG0).Count + res.Checker(CheckG1c).Count
	}
	t.Logf("%d G0/G1c components over the seeds (allowed)", cycles)
}

// Breaking a correct txn history is caught by the checker named with it.
func TestCheckTxn_SimulatedBreakagesAreCaught(t *testing.T) {
	cases := []struct {
		name, checker string
		break_        func(h History) bool
	}{
		{"a read txn is said aborted", CheckG1a, func(h History) bool {
			seen := map[string]bool{}
			for _, op := range h {
				for _, r := range op.Reads {
					for _, rec := range r.Records {
						seen[rec.Value] = true
					}
				}
			}
			for i := range h {
				if op := &h[i]; op.F == FTxn && op.Type == OK && len(op.Txn.Sends) > 0 && seen[op.Txn.Sends[0].Value] {
					op.Type = Fail
					return true
				}
			}
			return false
		}},
		{"a committed record vanishes from every read", CheckLostWrite, func(h History) bool {
			var victim string
			for i := len(h) - 1; i >= 0 && victim == ""; i-- {
				if op := &h[i]; op.F == FFinalRead && len(op.Reads[0].Records) > 2 {
					victim = op.Reads[0].Records[1].Value
				}
			}
			for i := range h {
				for j := range h[i].Reads {
					r := &h[i].Reads[j]
					r.Records = slices.DeleteFunc(r.Records, func(rec Record) bool { return rec.Value == victim })
				}
			}
			return victim != ""
		}},
		{"a final read skips a committed record", CheckPollSkip, func(h History) bool {
			for i := len(h) - 1; i >= 0; i-- {
				if op := &h[i]; op.F == FFinalRead && len(op.Reads[0].Records) > 2 {
					op.Reads[0].Records = append(op.Reads[0].Records[:1:1], op.Reads[0].Records[2:]...)
					return true
				}
			}
			return false
		}},
		{"a txn's poll sees a record before its commit", CheckUncommittedRead, func(h History) bool {
			for i := range h {
				op := &h[i]
				if op.F != FTxn || op.Type == Invoke || len(op.Reads) == 0 {
					continue
				}
				// Claim the reader called EndTxn at time 1: its polls ran
				// before any writer's EndTxn.
				op.Txn.EndStart = 1
				return true
			}
			return false
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newTxnSynth(7, 3).history(5, 600)
			if !tc.break_(h) {
				t.Fatal("nothing to break")
			}
			cfg := DefaultCheckConfig()
			cfg.Allowed = []string{CheckG0, CheckG1c}
			res, err := Check(h, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c := res.Checker(tc.checker); c.Verdict != VerdictFail {
				t.Fatalf("%s: %s; %s", tc.checker, c.Verdict, res.Summary())
			}
		})
	}
}
