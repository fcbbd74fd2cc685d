package isr

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower refused by a leader that has yet to apply the metadata the
// follower has (it knows no leader or an older epoch, or not the
// follower's epoch) asks again within behindBackoff, and its fetcher does
// not back off: the new leader's HW waits for that fetch. A refusal from
// a leader that knows more holds the follower back for refusedBackoff.
func TestPartition_RefusalFromALeaderBehind(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.setCut(1, 2, true) // node 2's own fetches fail before they reach applyFetch
	p := c.node(2).p
	pos, ok := p.fetchPosition(1, time.Now())
	if !ok {
		t.Fatal("node 2 does not fetch from node 1")
	}
	for _, tc := range []struct {
		name   string
		code   int16
		epoch  int32 // the refusal's CurrentLeader epoch
		usable bool
		held   time.Duration
	}{
		{"not leader, knowing no newer epoch", kerr.NotLeaderForPartition.Code, pos.epoch - 1, true, behindBackoff},
		{"unknown leader epoch", kerr.UnknownLeaderEpoch.Code, -1, true, behindBackoff},
		{"not leader, knowing a newer epoch", kerr.NotLeaderForPartition.Code, pos.epoch + 1, false, refusedBackoff},
		{"fenced leader epoch", kerr.FencedLeaderEpoch.Code, pos.epoch + 1, false, refusedBackoff},
	} {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode, rp.CurrentLeader.LeaderEpoch = tc.code, tc.epoch
		if got := p.applyFetch(1, pos, &rp); got != tc.usable {
			t.Errorf("%s: usable %v, want %v", tc.name, got, tc.usable)
		}
		now := time.Now()
		if d := p.retryIn(now); d <= 0 || d > tc.held {
			t.Errorf("%s: held back %s, want up to %s", tc.name, d, tc.held)
		}
		if _, ok := p.fetchPosition(1, now.Add(tc.held)); !ok {
			t.Errorf("%s: still held back after %s", tc.name, tc.held)
		}
		if got := retryWait([]*Partition{p}, now); got > tc.held {
			t.Errorf("%s: the fetcher waits %s, want at most %s", tc.name, got, tc.held)
		}
	}
}
