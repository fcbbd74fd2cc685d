package partition

import (
	"testing"
)

// truncateByEpoch is the follower's side of Kafka's epoch-based
// truncation (AbstractFetcherThread.getOffsetTruncationState, KIP-101 with
// KIP-279's fix): ask the leader for the end of the follower's newest
// epoch; when the leader answers with an epoch the follower does not have,
// cut to the follower's end for the largest epoch below it and ask again;
// otherwise cut to min(leader's end, follower's end for that epoch). It
// returns the offset truncated to.
func truncateByEpoch(t testing.TB, f, leader *ISRLog) int64 {
	t.Helper()
	epoch := f.LatestEpoch()
	for range 10 {
		le, lend := leader.EndOffsetFor(epoch, false)
		if le < 0 {
			t.Fatalf("leader knows no epoch at or below %d", epoch)
		}
		fe, fend := f.EndOffsetFor(le, false)
		target := fend
		if fe == le {
			target = min(lend, fend)
		}
		if err := f.TruncateTo(target); err != nil {
			t.Fatal(err)
		}
		if fe == le {
			return target
		}
		epoch = fe
	}
	t.Fatal("truncation did not converge")
	return -1
}

func reopenISR(t testing.TB, r *ISRLog) *ISRLog {
	t.Helper()
	dir := r.Log().Dir()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return openISR(t, dir, testConfig())
}

func assertSameLog(t testing.TB, a, b *ISRLog, values ...string) {
	t.Helper()
	ba, bb := storedBatches(t, a), storedBatches(t, b)
	if !equalBatches(ba, bb) {
		t.Fatalf("logs diverge: %d and %d batches", len(ba), len(bb))
	}
	if len(ba) != len(values) {
		t.Fatalf("log holds %d batches, want %d", len(ba), len(values))
	}
	for i, b := range ba {
		if want := plainBatch(t, values[i]); crcOf(b) != crcOf(want) {
			t.Fatalf("batch %d is not %q", i, values[i])
		}
	}
}

// TestISRLog_KIP101LostCommit is KIP-101's first scenario: the follower B
// has m2 but a high watermark that has not caught up when it restarts;
// truncating to its HW (pre-KIP-101) would drop m2, and after the leader
// A fails and B leads, the committed m2 would be gone from both.
// With leader epochs B keeps m2.
func TestISRLog_KIP101LostCommit(t *testing.T) {
	a, b := openISR(t, t.TempDir(), testConfig()), openISR(t, t.TempDir(), testConfig())
	if err := a.BecomeLeader(0); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, a, plainBatch(t, "m1"), 0)
	mustProduce(t, a, plainBatch(t, "m2"), 0)
	catchUp(t, b, a)
	a.SetHighWatermark(2) // B's fetch at 2 committed m2 on A
	b.SetHighWatermark(1) // B learns HW 2 only at its next fetch

	b = reopenISR(t, b)
	if got := truncateByEpoch(t, b, a); got != 2 {
		t.Fatalf("B truncated to %d after its restart, want 2 (its HW is %d)", got, b.HighWatermark())
	}
	// A fails; B leads epoch 1; A returns as a follower.
	if err := b.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	a = reopenISR(t, a)
	if got := truncateByEpoch(t, a, b); got != 2 {
		t.Fatalf("A truncated to %d, want 2", got)
	}
	mustProduce(t, b, plainBatch(t, "m3"), 1)
	catchUp(t, a, b)
	assertSameLog(t, a, b, "m1", "m2", "m3")
}

// TestISRLog_KIP101Divergence is KIP-101's second scenario: A leads with
// m1, m2; B has only m1 when both lose power; B comes back first, leads
// epoch 1 and writes m3 at offset 1. With HW truncation A would keep m2 at
// offset 1 and the logs would differ forever; by epoch A cuts m2.
func TestISRLog_KIP101Divergence(t *testing.T) {
	a, b := openISR(t, t.TempDir(), testConfig()), openISR(t, t.TempDir(), testConfig())
	if err := a.BecomeLeader(0); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, a, plainBatch(t, "m1"), 0)
	catchUp(t, b, a)
	mustProduce(t, a, plainBatch(t, "m2"), 0)
	a.SetHighWatermark(1)

	a, b = reopenISR(t, a), reopenISR(t, b)
	if err := b.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, b, plainBatch(t, "m3"), 1)
	if got := truncateByEpoch(t, a, b); got != 1 {
		t.Fatalf("A truncated to %d, want 1", got)
	}
	catchUp(t, a, b)
	assertSameLog(t, a, b, "m1", "m3")
	if got, want := a.Epochs(), b.Epochs(); len(got) != 2 || got[1] != want[1] {
		t.Fatalf("epochs differ: A %v, B %v", got, want)
	}
}

// TestISRLog_KIP279FastFailover is KIP-279's case, back-to-back elections
// across three replicas: A leads epoch 1 with m1, m2 (B and C have m1); A
// fails, B leads epoch 2 and writes m3 at offset 1, then fails before
// anyone fetches it; A returns and leads epoch 3 (C fetched nothing new)
// and writes m4. B returns as a follower with [m1, m3]. A does not know
// epoch 2: before KIP-279 it answered the start of epoch 3 (2), B kept m3
// at offset 1 where A has m2, and the logs diverged. A answers (1, 2): B
// cuts to its own end of epoch 1, offset 1, and refetches.
func TestISRLog_KIP279FastFailover(t *testing.T) {
	a, b, c := openISR(t, t.TempDir(), testConfig()), openISR(t, t.TempDir(), testConfig()), openISR(t, t.TempDir(), testConfig())
	if err := a.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, a, plainBatch(t, "m1"), 1)
	catchUp(t, b, a)
	catchUp(t, c, a)
	mustProduce(t, a, plainBatch(t, "m2"), 1)

	if err := b.BecomeLeader(2); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, b, plainBatch(t, "m3"), 2)

	if err := a.BecomeLeader(3); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, a, plainBatch(t, "m4"), 3)
	if e, off := a.EndOffsetFor(2, false); e != 1 || off != 2 {
		t.Fatalf("A's end for epoch 2 = (%d, %d), want (1, 2)", e, off)
	}
	if got := truncateByEpoch(t, c, a); got != 1 {
		t.Fatalf("C truncated to %d, want 1", got)
	}
	if got := truncateByEpoch(t, b, a); got != 1 {
		t.Fatalf("B truncated to %d, want 1 (m3 of epoch 2 must go)", got)
	}
	catchUp(t, b, a)
	catchUp(t, c, a)
	assertSameLog(t, a, b, "m1", "m2", "m4")
	assertSameLog(t, a, c, "m1", "m2", "m4")
	want := []EpochStart{{1, 0}, {3, 2}}
	for name, r := range map[string]*ISRLog{"A": a, "B": b, "C": c} {
		if got := r.Epochs(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s's epochs %v, want %v", name, got, want)
		}
	}
}
