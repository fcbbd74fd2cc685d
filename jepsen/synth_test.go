package jepsen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// synth simulates a correct single-copy queue and the clients of a run,
// and records the history they would produce: ops overlap in time, each
// takes effect at one instant between its invocation and completion.
type synth struct {
	rng   *rand.Rand
	b     hb
	logs  map[int32][]string
	parts int32
	// pending ops in flight per process: the invocation and its effect,
	// applied when the op completes, so effects happen in completion order.
	pending map[int]*synthOp
	pos     map[int]map[int32]int64 // consumer positions
	n       int
}

type synthOp struct {
	inv   Op
	apply func() func(*Op)
}

func newSynth(seed uint64, parts int32) *synth {
	return &synth{
		rng: rand.New(rand.NewPCG(seed, 1)), logs: map[int32][]string{}, parts: parts,
		pending: map[int]*synthOp{}, pos: map[int]map[int32]int64{},
	}
}

// history runs producers and consumers for steps events, then final reads.
func (s *synth) history(producers, consumers, steps int) History {
	for range steps {
		proc := s.rng.IntN(producers + consumers)
		if op, busy := s.pending[proc]; busy {
			s.complete(proc, op)
			continue
		}
		if proc < producers {
			s.invokeSend(proc)
		} else {
			s.invokePoll(proc)
		}
	}
	for proc, op := range s.pending {
		s.complete(proc, op)
	}
	for p := range s.parts {
		var kv []any
		for o, v := range s.logs[p] {
			kv = append(kv, o, v)
		}
		s.b.final(1000+int(p), p, OK, int64(len(s.logs[p])), kv...)
	}
	return s.b.h
}

func (s *synth) complete(proc int, op *synthOp) {
	delete(s.pending, proc)
	fill := op.apply()
	s.b.complete(op.inv, OK, fill)
}

func (s *synth) invokeSend(proc int) {
	p := s.rng.Int32N(s.parts)
	v := fmt.Sprintf("p%d-%06d", proc, s.n)
	s.n++
	inv := s.b.sendInv(proc, p, v)
	s.pending[proc] = &synthOp{inv: inv, apply: func() func(*Op) {
		off := int64(len(s.logs[p]))
		s.logs[p] = append(s.logs[p], v)
		return func(c *Op) { c.Send.Offset = off }
	}}
}

func (s *synth) invokePoll(proc int) {
	if s.pos[proc] == nil {
		seeks := []Seek{}
		s.pos[proc] = map[int32]int64{}
		for p := range s.parts {
			seeks = append(seeks, seek(p, 0))
			s.pos[proc][p] = 0
		}
		s.b.assign(proc, seeks...)
	}
	inv := s.b.pollInv(proc)
	s.pending[proc] = &synthOp{inv: inv, apply: func() func(*Op) {
		var reads []PartitionRead
		for p := range s.parts {
			log := s.logs[p]
			from := s.pos[proc][p]
			to := min(int64(len(log)), from+int64(s.rng.IntN(4)))
			if to == from {
				continue
			}
			r := part(p, int64(len(log)))
			for o := from; o < to; o++ {
				r.Records = append(r.Records, Record{Offset: o, Value: log[o]})
			}
			s.pos[proc][p] = to
			reads = append(reads, r)
		}
		return func(c *Op) { c.Reads = reads }
	}}
}

func TestCheck_SimulatedCorrectQueuesAreValid(t *testing.T) {
	for seed := range uint64(20) {
		h := newSynth(seed, 3).history(4, 3, 400)
		res := check(t, h)
		if !res.Valid || res.Verdict != VerdictOK {
			t.Fatalf("seed %d: %s %+v", seed, res.Summary(), res.Checkers)
		}
	}
}

// mutate breaks one thing in a correct history; each break must be caught
// by the checker named with it.
func TestCheck_SimulatedBreakagesAreCaught(t *testing.T) {
	cases := []struct {
		name    string
		checker string
		break_  func(h History) bool
	}{
		{"a write vanishes from every read", CheckLostWrite, func(h History) bool {
			var victim string
			for i := range h {
				if op := &h[i]; op.F == FSend && op.Type == OK && op.Send.Offset == 0 {
					victim = op.Send.Value
					break
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
		{"final read skips a record", CheckPollSkip, func(h History) bool {
			for i := len(h) - 1; i >= 0; i-- {
				if op := &h[i]; op.F == FFinalRead && op.Type == OK && len(op.Reads[0].Records) > 2 {
					r := op.Reads[0].Records
					op.Reads[0].Records = append(r[:1:1], r[2:]...)
					return true
				}
			}
			return false
		}},
		{"ack reports a taken offset", CheckInconsistent, func(h History) bool {
			for i := len(h) - 1; i >= 0; i-- {
				if op := &h[i]; op.F == FSend && op.Type == OK && op.Send.Offset > 0 {
					op.Send.Offset--
					return true
				}
			}
			return false
		}},
		{"poll returns a value twice", CheckDuplicate, func(h History) bool {
			for i := range h {
				if op := &h[i]; op.F == FPoll && op.Type == OK && len(op.Reads) > 0 && len(op.Reads[0].Records) > 1 {
					r := op.Reads[0].Records
					r[1].Value = r[0].Value
					return true
				}
			}
			return false
		}},
		{"poll goes backwards", CheckNonmonotonicPoll, func(h History) bool {
			for i := range h {
				if op := &h[i]; op.F == FPoll && op.Type == OK && len(op.Reads) > 0 && len(op.Reads[0].Records) > 1 {
					r := op.Reads[0].Records
					r[0], r[1] = r[1], r[0]
					return true
				}
			}
			return false
		}},
		{"a send becomes a failure", CheckG1a, func(h History) bool {
			for i := range h {
				if op := &h[i]; op.F == FSend && op.Type == OK {
					op.Type, op.Send.Offset = Fail, NoOffset
					return true
				}
			}
			return false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			broken := 0
			for seed := range uint64(10) {
				h := newSynth(seed, 2).history(3, 2, 300)
				if !c.break_(h) {
					continue
				}
				broken++
				res := check(t, h)
				if got := res.Checker(c.checker); got.Verdict != VerdictFail {
					t.Errorf("seed %d: %s %s; %s", seed, c.checker, got.Verdict, res.Summary())
				}
				if res.Valid {
					t.Errorf("seed %d: still valid", seed)
				}
			}
			if broken == 0 {
				t.Fatal("no seed gave a history this breakage applies to")
			}
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	h := newSynth(1, 4).history(8, 4, 40000)
	b.Logf("%d ops", len(h))
	run := func(b *testing.B, cfg CheckConfig) {
		for b.Loop() {
			if _, err := Check(h, cfg); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	// The baseline: every checker but porcupine.
	b.Run("baseline-no-linearizability", func(b *testing.B) {
		cfg := DefaultCheckConfig()
		cfg.SkipLinearizability = true
		run(b, cfg)
	})
	b.Run("all-checkers", func(b *testing.B) { run(b, DefaultCheckConfig()) })
}

func BenchmarkRecorder(b *testing.B) {
	op := Op{Process: 3, F: FSend, Send: &SendValue{Topic: "t", Partition: 1, Key: "k1", Value: "p3-000123", Offset: NoOffset}}
	// The baseline: building the line alone, without the lock and clock.
	b.Run("baseline-encode", func(b *testing.B) {
		w := &countWriter{}
		for b.Loop() {
			if err := writeOp(w, &op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		r := NewRecorder(&countWriter{})
		for b.Loop() {
			r.Record(op)
		}
	})
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
