package jepsen

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckLostWrite_AckedWriteBelowAReadIsLost(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1) // acknowledged, then gone
	b.send(1, 0, "c", OK, 2)
	b.assign(2, seek(0, 0))
	b.poll(2, part(0, 3, 0, "a", 2, "c"))
	c := wantVerdict(t, b.h, CheckLostWrite, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Value != "b" || ex.Offset != 1 || ex.Process != 0 {
		t.Errorf("example %+v, want b at offset 1 by process 0", ex)
	}
	wantVerdict(t, clean().h, CheckLostWrite, VerdictOK, 0)
}

func TestCheckLostWrite_OverwrittenOffsetIsLost(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(1, 0, "b", OK, 0) // a new leader reused offset 0
	b.final(2, 0, OK, 1, 0, "b")
	wantVerdict(t, b.h, CheckLostWrite, VerdictFail, 1)
	wantVerdict(t, b.h, CheckInconsistent, VerdictFail, 1)
}

func TestCheckLostWrite_IndefiniteSendLaterReadIsNotLost(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", Info, NoOffset) // timed out, but landed
	b.send(1, 0, "b", OK, 1)
	b.final(2, 0, OK, 2, 0, "a", 1, "b")
	res := check(t, b.h)
	for _, c := range res.Checkers {
		if c.Verdict != VerdictOK {
			t.Errorf("%s: %s %+v", c.Name, c.Verdict, c.Examples)
		}
	}
}

func TestCheckLostWrite_IndefiniteSendNeverReadIsNotLost(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", Info, NoOffset) // never landed
	b.send(1, 0, "b", OK, 0)
	b.final(2, 0, OK, 1, 0, "b")
	res := check(t, b.h)
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("%s", res.Summary())
	}
}

func TestCheckLostWrite_UnreadBecauseFinalReadFailedIsUnknownNotLost(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.assign(2, seek(0, 0))
	b.poll(2, part(0, 1, 0, "a"))
	b.final(3, 0, Info, NoOffset) // the final read timed out
	wantVerdict(t, b.h, CheckLostWrite, VerdictOK, 0)
	c := wantVerdict(t, b.h, CheckUnseen, VerdictUnknown, 0)
	if c.Counts["t/0 no-final-read"] != 1 {
		t.Errorf("unseen counts %v", c.Counts)
	}
	res := check(t, b.h)
	if !res.Valid || res.Verdict != VerdictUnknown {
		t.Errorf("valid %v verdict %s, want valid and unknown", res.Valid, res.Verdict)
	}
}

func TestCheckLostWrite_ReadThatStartedPastTheOffsetDoesNotCoverIt(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.send(0, 0, "c", OK, 2)
	b.assign(2, seek(0, 2))
	b.poll(2, part(0, 3, 2, "c"))
	wantVerdict(t, b.h, CheckLostWrite, VerdictOK, 0)
	wantVerdict(t, b.h, CheckUnseen, VerdictUnknown, 0)
}

func TestCheckUnseen_CompleteFinalReadMissingAnAckedSend(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1) // the tail was truncated
	b.final(1, 0, OK, 1, 0, "a")
	c := wantVerdict(t, b.h, CheckUnseen, VerdictFail, 1)
	if c.Examples[0].Value != "b" {
		t.Errorf("example %+v", c.Examples[0])
	}
	// Above the final high watermark, no read covered it: only unseen sees it.
	wantVerdict(t, b.h, CheckLostWrite, VerdictOK, 0)
	wantVerdict(t, b.h, CheckLinearizable, VerdictFail, 1)
	wantVerdict(t, clean().h, CheckUnseen, VerdictOK, 0)
}

func TestCheckUnseen_SeriesCountsAckedButNotYetSeen(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0) // t=20: 1 unseen
	b.send(0, 0, "b", OK, 1) // t=40: 2 unseen
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 2, 0, "a")) // t=80: 1 unseen
	b.final(2, 0, OK, 2, 0, "a", 1, "b")
	res := check(t, b.h)
	var got []int
	for _, p := range res.Unseen {
		got = append(got, p.Unseen)
	}
	if want := []int{1, 2, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("unseen series %v, want %v (%+v)", got, want, res.Unseen)
	}
}

func TestCheckDuplicate(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.final(1, 0, OK, 3, 0, "a", 1, "b", 2, "a") // a retried send landed twice
	c := wantVerdict(t, b.h, CheckDuplicate, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Value != "a" || !slices.Equal(ex.Offsets, []int64{0, 2}) {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, clean().h, CheckDuplicate, VerdictOK, 0)
}

func TestCheckDuplicate_AckAndReadDisagree(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 5) // acknowledged at 5, read at 0
	b.final(1, 0, OK, 1, 0, "a")
	wantVerdict(t, b.h, CheckDuplicate, VerdictFail, 1)
}

func TestCheckInconsistentOffsets(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", Info, NoOffset)
	b.send(1, 0, "b", Info, NoOffset)
	b.assign(2, seek(0, 0))
	b.poll(2, part(0, 1, 0, "a"))
	b.assign(3, seek(0, 0))
	b.poll(3, part(0, 1, 0, "b")) // two readers disagree on offset 0
	c := wantVerdict(t, b.h, CheckInconsistent, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Offset != 0 || !slices.Equal(ex.Values, []string{"a", "b"}) || len(ex.Ops) != 2 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, clean().h, CheckInconsistent, VerdictOK, 0)
}

func TestCheckNonmonotonicSend(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 1)
	b.send(0, 0, "b", OK, 0) // the same process's later send lands earlier
	b.send(1, 0, "c", OK, 2)
	b.send(0, 1, "d", OK, 0) // another partition starts over: fine
	c := wantVerdict(t, b.h, CheckNonmonotonicSend, VerdictFail, 1)
	if ex := c.Examples[0]; !slices.Equal(ex.Values, []string{"a", "b"}) || ex.Process != 0 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, clean().h, CheckNonmonotonicSend, VerdictOK, 0)
}

func TestCheckNonmonotonicSend_IndefiniteSendPlacedByRead(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 1)
	b.send(0, 0, "b", Info, NoOffset)
	b.final(1, 0, OK, 2, 0, "b", 1, "a")
	wantVerdict(t, b.h, CheckNonmonotonicSend, VerdictFail, 1)
}

func TestCheckNonmonotonicPoll(t *testing.T) {
	b := &hb{}
	for i, v := range []string{"a", "b", "c"} {
		b.send(0, 0, v, OK, int64(i))
	}
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 3, 0, "a", 1, "b", 2, "c"))
	b.poll(1, part(0, 3, 1, "b")) // back to 1 without a seek
	c := wantVerdict(t, b.h, CheckNonmonotonicPoll, VerdictFail, 1)
	if ex := c.Examples[0]; !slices.Equal(ex.Offsets, []int64{2, 1}) || ex.Process != 1 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, clean().h, CheckNonmonotonicPoll, VerdictOK, 0)
}

func TestCheckNonmonotonicPoll_WithinOnePoll(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 2, 1, "b", 0, "a"))
	wantVerdict(t, b.h, CheckNonmonotonicPoll, VerdictFail, 1)
}

func TestCheckNonmonotonicPoll_SeekBackwardsIsNotNonmonotonic(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 2, 0, "a", 1, "b"))
	b.assign(1, seek(0, 0)) // seek back to the start
	b.poll(1, part(0, 2, 0, "a", 1, "b"))
	res := check(t, b.h)
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("%s", res.Summary())
	}
}

func TestCheckNonmonotonicPoll_RebalanceResetsPosition(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	inv := b.invoke(Op{Process: 1, F: FSubscribe, Topics: []string{topic}, Group: "g"})
	b.complete(inv, OK, nil)
	b.poll(1, part(0, 2, 0, "a", 1, "b"))
	p := b.pollInv(1)
	b.complete(p, OK, func(c *Op) {
		c.Rebalanced = []TP{{topic, 0}}
		c.Reads = []PartitionRead{part(0, 2, 1, "b")} // resumed from the committed offset
	})
	wantVerdict(t, b.h, CheckNonmonotonicPoll, VerdictOK, 0)
	wantVerdict(t, b.h, CheckPollSkip, VerdictOK, 0)
}

func TestCheckPollSkip(t *testing.T) {
	b := &hb{}
	for i, v := range []string{"a", "b", "c", "d"} {
		b.send(0, 0, v, OK, int64(i))
	}
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 4, 0, "a", 1, "b"))
	b.poll(1, part(0, 4, 3, "d")) // offset 2 holds c
	b.final(2, 0, OK, 4, 0, "a", 1, "b", 2, "c", 3, "d")
	c := wantVerdict(t, b.h, CheckPollSkip, VerdictFail, 1)
	if ex := c.Examples[0]; !slices.Equal(ex.Offsets, []int64{2}) || ex.Offset != 3 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, clean().h, CheckPollSkip, VerdictOK, 0)
}

func TestCheckPollSkip_FromSeekOffset(t *testing.T) {
	b := &hb{}
	for i, v := range []string{"a", "b", "c"} {
		b.send(0, 0, v, OK, int64(i))
	}
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 3, 2, "c"))
	wantVerdict(t, b.h, CheckPollSkip, VerdictFail, 1)
	wantVerdict(t, b.h, CheckLostWrite, VerdictFail, 2)
}

// A stream whose first record lies below its seek offset (the log lost
// its tail under the client, which reset to what is there) skipped
// nothing; the checker once panicked on the backwards range. Found by
// TestE2E_JepsenLoseUnfsyncedLosesWritesWithFsyncNever in CI.
func TestCheckPollSkip_FirstRecordBelowTheSeek(t *testing.T) {
	b := &hb{}
	for i, v := range []string{"a", "b", "c"} {
		b.send(0, 0, v, OK, int64(i))
	}
	b.assign(1, seek(0, 2))
	b.poll(1, part(0, 1, 0, "a"))
	wantVerdict(t, b.h, CheckPollSkip, VerdictOK, 0)
}

func TestCheckPollSkip_GapNobodyKnowsIsNotASkip(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "c", OK, 2) // offset 1 was never seen by anyone
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 3, 0, "a"))
	b.poll(1, part(0, 3, 2, "c"))
	wantVerdict(t, b.h, CheckPollSkip, VerdictOK, 0)
}

func TestCheckG1a(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", Fail, NoOffset) // definitely failed...
	b.send(0, 0, "b", OK, 1)
	b.final(1, 0, OK, 2, 0, "a", 1, "b") // ...yet read
	c := wantVerdict(t, b.h, CheckG1a, VerdictFail, 1)
	if c.Counts["G1a"] != 1 || c.Examples[0].Value != "a" {
		t.Errorf("counts %v example %+v", c.Counts, c.Examples[0])
	}
	wantVerdict(t, clean().h, CheckG1a, VerdictOK, 0)
}

func TestCheckG1a_PhantomAndMisplacedValues(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.final(1, 0, OK, 1, 0, "a")
	b.final(1, 1, OK, 2, 0, "zz", 1, "a") // zz was never sent; a belongs to partition 0
	c := wantVerdict(t, b.h, CheckG1a, VerdictFail, 2)
	if c.Counts["phantom"] != 2 {
		t.Errorf("counts %v", c.Counts)
	}
}

func TestCheckLinearizable_RealTimeOrderViolation(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 1) // a is acknowledged at offset 1...
	b.send(1, 0, "b", OK, 0) // ...before b, sent later by another process, takes offset 0
	b.final(2, 0, OK, 2, 0, "b", 1, "a")
	res := check(t, b.h)
	for _, c := range res.Checkers {
		want := VerdictOK
		if c.Name == CheckLinearizable {
			want = VerdictFail
		}
		if c.Verdict != want {
			t.Errorf("%s: %s, want %s", c.Name, c.Verdict, want)
		}
	}
	if len(res.Linearizability) != 1 || res.Linearizability[0].Verdict != VerdictFail {
		t.Errorf("partitions %+v", res.Linearizability)
	}
}

func TestCheckLinearizable_ConcurrentSendsAndStaleBufferedPoll(t *testing.T) {
	b := &hb{}
	a := b.sendInv(0, 0, "a")
	c := b.sendInv(1, 0, "c")
	p := b.pollInv(2)
	b.sendDone(c, OK, 0) // c was invoked after a but landed first: both concurrent
	b.sendDone(a, OK, 1)
	b.pollDone(p, part(0, 1, 0, "c"))
	// This poll starts after both acks yet reports hw 1 and only c: kgo
	// served it from a fetch buffered earlier. That is still linearizable.
	b.assign(4, seek(0, 0))
	b.poll(4, part(0, 1, 0, "c"))
	b.final(3, 0, OK, 2, 0, "c", 1, "a")
	res := check(t, b.h)
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("%s %+v", res.Summary(), res.Checkers)
	}
}

func TestCheckLinearizable_IndefiniteSendsStayOpen(t *testing.T) {
	b := &hb{}
	x := b.sendInv(0, 0, "x")
	b.sendDone(x, Info, NoOffset)
	b.send(1, 0, "a", OK, 0)
	y := b.sendInv(4, 0, "y") // never completes: the history ends first
	b.send(1, 0, "b", OK, 1)
	// x lands after everything the final read saw: it stays open past it.
	b.final(2, 0, OK, 2, 0, "a", 1, "b")
	b.final(3, 0, OK, 4, 0, "a", 1, "b", 2, "y", 3, "x")
	_ = y
	wantVerdict(t, b.h, CheckLinearizable, VerdictOK, 0)
}

func TestCheckLinearizable_TimeoutIsUnknownNotOK(t *testing.T) {
	b := &hb{}
	var invs []Op
	for i := range 40 {
		invs = append(invs, b.sendInv(i, 0, "v"+string(rune('A'+i))))
	}
	for _, inv := range invs {
		b.sendDone(inv, Info, NoOffset)
	}
	// No value sent can explain offset 39: every subset and order of the
	// open sends must be tried before porcupine could call it illegal.
	b.final(100, 0, Info, NoOffset, 39, "nobody")
	cfg := DefaultCheckConfig()
	cfg.LinearizabilityTimeout = 100 * time.Millisecond
	res, err := Check(b.h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lin := res.Checker(CheckLinearizable)
	if lin.Verdict != VerdictUnknown || lin.Counts["t/0 timeout"] != 1 {
		t.Fatalf("linearizable %+v", lin)
	}
	if res.Checker(CheckG1a).Verdict != VerdictFail || res.Verdict != VerdictFail {
		t.Fatalf("the phantom read must still fail the run: %s", res.Summary())
	}
}

func TestCheckLinearizable_Skipped(t *testing.T) {
	cfg := DefaultCheckConfig()
	cfg.SkipLinearizability = true
	res, err := Check(clean().h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checker(CheckLinearizable).Verdict != VerdictUnknown || res.Verdict != VerdictUnknown || !res.Valid {
		t.Fatalf("%s", res.Summary())
	}
}

func TestCheck_AllowedFailureKeepsRunValid(t *testing.T) {
	b := clean()
	b.assign(5, seek(0, 0))
	b.poll(5, part(0, 2, 1, "b")) // skips a
	cfg := DefaultCheckConfig()
	cfg.Allowed = []string{CheckPollSkip, CheckLostWrite}
	res, err := Check(b.h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Verdict != VerdictOK || !res.Checker(CheckPollSkip).Allowed {
		t.Fatalf("%s", res.Summary())
	}
	if !strings.Contains(res.Summary(), "poll-skip=1(allowed)") {
		t.Errorf("summary %q", res.Summary())
	}
}

func TestCheck_MalformedHistories(t *testing.T) {
	cases := map[string]func(b *hb){
		"completion without invoke": func(b *hb) { b.add(Op{Type: OK, Process: 1, F: FPoll}) },
		"two invokes": func(b *hb) {
			b.pollInv(1)
			b.pollInv(1)
		},
		"f mismatch": func(b *hb) {
			inv := b.pollInv(1)
			inv.F = FAssign
			b.complete(inv, OK, nil)
		},
		"invoke after info": func(b *hb) {
			b.send(0, 0, "a", Info, NoOffset)
			b.send(0, 0, "b", OK, 0)
		},
		"value sent twice": func(b *hb) {
			b.send(0, 0, "a", OK, 0)
			b.send(1, 0, "a", OK, 1)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := &hb{}
			build(b)
			_, err := Check(b.h, DefaultCheckConfig())
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
	}
}

func TestCheckConfig_Validate(t *testing.T) {
	if err := DefaultCheckConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []CheckConfig{
		{LinearizabilityTimeout: 0},
		{LinearizabilityTimeout: time.Second, MaxExamples: -1},
		{LinearizabilityTimeout: time.Second, Allowed: []string{"no-such"}},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: err %v", c, err)
		}
	}
}

func TestDownsample_KeepsPeaksAndLastPoint(t *testing.T) {
	var pts []UnseenPoint
	for i := range 1000 {
		pts = append(pts, UnseenPoint{Time: int64(i), Unseen: i % 10})
	}
	pts[501].Unseen = 99
	out := downsample(pts, 50)
	if len(out) > 50 || out[len(out)-1] != pts[len(pts)-1] {
		t.Fatalf("%d points, last %+v", len(out), out[len(out)-1])
	}
	peak := 0
	for i, p := range out {
		peak = max(peak, p.Unseen)
		if i > 0 && p.Time <= out[i-1].Time {
			t.Fatalf("times not increasing at %d", i)
		}
	}
	if peak != 99 {
		t.Fatalf("peak %d lost", peak)
	}
}
