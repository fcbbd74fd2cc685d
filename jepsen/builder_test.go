package jepsen

import (
	"testing"
	"time"
)

const topic = "t"

// hb builds hand-made histories: each op gets the next index and a time 10ns
// after the previous one.
type hb struct {
	h History
	t int64
}

func (b *hb) add(op Op) Op {
	op.Index = int64(len(b.h))
	b.t += 10
	op.Time = b.t
	b.h = append(b.h, op)
	return op
}

func (b *hb) invoke(op Op) Op {
	op.Type = Invoke
	return b.add(op)
}

func (b *hb) complete(inv Op, t Type, edit func(*Op)) Op {
	c := inv.Completion(t)
	if edit != nil {
		edit(&c)
	}
	return b.add(c)
}

// sendInv invokes a send of v to partition p.
func (b *hb) sendInv(proc int, p int32, v string) Op {
	return b.invoke(Op{Process: proc, F: FSend, Send: &SendValue{Topic: topic, Partition: p, Key: "k", Value: v, Offset: NoOffset}})
}

// sendDone completes a send; off is the acknowledged offset for ok.
func (b *hb) sendDone(inv Op, t Type, off int64) Op {
	return b.complete(inv, t, func(c *Op) {
		if t == OK {
			c.Send.Offset = off
		}
		if t != OK {
			c.Error = "test: " + string(t)
		}
	})
}

// send invokes and completes a send at once.
func (b *hb) send(proc int, p int32, v string, t Type, off int64) Op {
	return b.sendDone(b.sendInv(proc, p, v), t, off)
}

func (b *hb) assign(proc int, seeks ...Seek) {
	inv := b.invoke(Op{Process: proc, F: FAssign, Seeks: seeks})
	b.complete(inv, OK, nil)
}

func seek(p int32, off int64) Seek { return Seek{Topic: topic, Partition: p, Offset: off} }

// part is one partition's part of a poll: records as offset, value pairs.
func part(p int32, hw int64, kv ...any) PartitionRead {
	r := PartitionRead{Topic: topic, Partition: p, HighWatermark: hw, Records: []Record{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Records = append(r.Records, Record{Offset: int64(kv[i].(int)), Value: kv[i+1].(string)})
	}
	return r
}

func (b *hb) pollInv(proc int) Op { return b.invoke(Op{Process: proc, F: FPoll}) }

func (b *hb) pollDone(inv Op, reads ...PartitionRead) Op {
	return b.complete(inv, OK, func(c *Op) { c.Reads = reads })
}

func (b *hb) poll(proc int, reads ...PartitionRead) Op { return b.pollDone(b.pollInv(proc), reads...) }

// final records a final read of partition p.
func (b *hb) final(proc int, p int32, t Type, hw int64, kv ...any) Op {
	inv := b.invoke(Op{Process: proc, F: FFinalRead, Reads: []PartitionRead{part(p, NoOffset)}})
	return b.complete(inv, t, func(c *Op) { c.Reads = []PartitionRead{part(p, hw, kv...)} })
}

func (b *hb) nemesis(f F, name string) {
	inv := b.invoke(Op{Process: NemesisProcess, F: f, Nemesis: name})
	b.complete(inv, Info, nil)
}

func check(t *testing.T, h History) *Results {
	t.Helper()
	cfg := DefaultCheckConfig()
	cfg.LinearizabilityTimeout = 10 * time.Second
	res, err := Check(h, cfg)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return res
}

// verdict runs Check and returns one checker's result.
func verdict(t *testing.T, h History, name string) CheckerResult {
	t.Helper()
	c := check(t, h).Checker(name)
	if c == nil {
		t.Fatalf("no checker %s", name)
	}
	return *c
}

func wantVerdict(t *testing.T, h History, name string, want Verdict, count int) CheckerResult {
	t.Helper()
	c := verdict(t, h, name)
	if c.Verdict != want || c.Count != count {
		t.Fatalf("%s: verdict %s count %d, want %s count %d; examples %+v counts %v", name, c.Verdict, c.Count, want, count, c.Examples, c.Counts)
	}
	if want == VerdictFail && len(c.Examples) == 0 {
		t.Fatalf("%s failed without examples", name)
	}
	return c
}

// clean is a small valid history: two producers, a poller that assigns
// and polls everything, a nemesis interval and complete final reads.
func clean() *hb {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.nemesis(FStart, "kill")
	b.send(1, 1, "x", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.nemesis(FStop, "kill")
	b.assign(2, seek(0, 0), seek(1, 0))
	b.poll(2, part(0, 2, 0, "a", 1, "b"), part(1, 1, 0, "x"))
	b.send(1, 1, "y", OK, 1)
	b.poll(2, part(1, 2, 1, "y"))
	b.final(3, 0, OK, 2, 0, "a", 1, "b")
	b.final(3, 1, OK, 2, 0, "x", 1, "y")
	return b
}

func TestCheck_CleanHistoryPassesEveryChecker(t *testing.T) {
	res := check(t, clean().h)
	for _, c := range res.Checkers {
		if c.Verdict != VerdictOK {
			t.Errorf("%s: %s %+v", c.Name, c.Verdict, c)
		}
	}
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("valid %v verdict %s", res.Valid, res.Verdict)
	}
	if got, want := res.Stats.ByF[FSend][OK], 4; got != want {
		t.Errorf("ok sends %d, want %d", got, want)
	}
	if got, want := res.Stats.Nemeses, []string{"kill"}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("nemeses %v, want %v", got, want)
	}
}
