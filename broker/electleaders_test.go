package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// electRequest is an ElectLeaders request of version v and election
// type typ for parts (topic -> partitions; nil: every partition).
func electRequest(v int16, typ int8, parts map[string][]int32) *kmsg.ElectLeadersRequest {
	r := kmsg.NewPtrElectLeadersRequest()
	r.Version, r.ElectionType, r.TimeoutMillis = v, typ, 5000
	if parts == nil {
		return r
	}
	r.Topics = []kmsg.ElectLeadersRequestTopic{}
	for topic, ps := range parts {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func serveElect(t *testing.T, n *Node, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout(r.TimeoutMillis))
	defer cancel()
	return n.electLeaders(ctx, r)
}

// electResult is one partition's code and message in resp; ok is false
// when resp leaves it out.
func electResult(resp *kmsg.ElectLeadersResponse, topic string, p int32) (code int16, msg string, ok bool) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == p {
				if rp.ErrorMessage != nil {
					msg = *rp.ErrorMessage
				}
				return rp.ErrorCode, msg, true
			}
		}
	}
	return 0, "", false
}

func wantElect(t *testing.T, resp *kmsg.ElectLeadersResponse, topic string, p int32, want *kerr.Error, msgHas string) {
	t.Helper()
	code, msg, ok := electResult(resp, topic, p)
	switch {
	case !ok:
		t.Errorf("%s-%d: not in the answer %+v", topic, p, resp.Topics)
	case want == nil && code != 0:
		t.Errorf("%s-%d: %v (%s), want success", topic, p, kerr.ErrorForCode(code), msg)
	case want != nil && code != want.Code:
		t.Errorf("%s-%d: %v (%s), want %v", topic, p, kerr.ErrorForCode(code), msg, want)
	case !strings.Contains(msg, msgHas):
		t.Errorf("%s-%d: message %q, want it to say %q", topic, p, msg, msgHas)
	}
}

// preferredPartition returns the index of topic's partition whose first
// replica is id.
func preferredPartition(t *testing.T, n *Node, topic string, id uint64) int32 {
	t.Helper()
	for _, p := range n.meta.View().Topics[topic].Partitions {
		if p.Replicas[0] == id {
			return p.Index
		}
	}
	t.Fatalf("no partition of %s prefers broker %d", topic, id)
	return -1
}

// A request naming unknown topics or partitions gets
// UNKNOWN_TOPIC_OR_PARTITION for each; an unclean election of a raft
// partition INVALID_REQUEST, saying why; an unknown election type
// INVALID_REQUEST for the request and each partition.
func TestElectLeaders_UnknownUncleanRaftAndBadType(t *testing.T) {
	n := newUnitNode(t, "t", nil, newFakeReplication(t, 1), newFakeReplication(t, 1))
	resp := serveElect(t, n, electRequest(2, electUnclean, map[string][]int32{"t": {0, 5, -1}, "nope": {0}}))
	wantElect(t, resp, "t", 0, kerr.InvalidRequest, "raft never elects uncleanly")
	wantElect(t, resp, "t", 5, kerr.UnknownTopicOrPartition, "")
	wantElect(t, resp, "t", -1, kerr.UnknownTopicOrPartition, "")
	wantElect(t, resp, "nope", 0, kerr.UnknownTopicOrPartition, "")
	if resp.ErrorCode != 0 {
		t.Errorf("request error %v, want none", kerr.ErrorForCode(resp.ErrorCode))
	}
	resp = serveElect(t, n, electRequest(2, 7, map[string][]int32{"t": {0}}))
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 7: request error %v, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
	wantElect(t, resp, "t", 0, kerr.InvalidRequest, "election type 7")
}

// A preferred election of a raft partition whose preferred replica
// leads needs none; one whose preferred replica is dead, in controlled
// shutdown or in maintenance cannot be made. Version 0, which has no
// election type, is preferred.
func TestElectLeaders_RaftPreferredNotNeededOrNotAvailable(t *testing.T) {
	reps := []*fakeReplication{newFakeReplication(t, 1), newFakeReplication(t, 1), newFakeReplication(t, 1)}
	n := newUnitNode(t, "t", nil, reps...)
	mine, of2, of3 := preferredPartition(t, n, "t", 1), preferredPartition(t, n, "t", 2), preferredPartition(t, n, "t", 3)
	resp := serveElect(t, n, electRequest(0, electUnclean, map[string][]int32{"t": {mine}}))
	wantElect(t, resp, "t", mine, kerr.ElectionNotNeeded, "leads already")
	applyMeta(t, n, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 2, Alive: false}},
		&coordinator.Command{SetMaintenance: &coordinator.SetMaintenance{ID: 3, On: true}})
	resp = serveElect(t, n, electRequest(2, electPreferred, map[string][]int32{"t": {of2, of3}}))
	wantElect(t, resp, "t", of2, kerr.PreferredLeaderNotAvailable, "is not alive")
	wantElect(t, resp, "t", of3, kerr.PreferredLeaderNotAvailable, "in maintenance")
	applyMeta(t, n, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 2, Alive: true}},
		&coordinator.Command{ControlledShutdown: &coordinator.ControlledShutdown{ID: 2}})
	resp = serveElect(t, n, electRequest(1, electPreferred, map[string][]int32{"t": {of2}}))
	wantElect(t, resp, "t", of2, kerr.PreferredLeaderNotAvailable, "controlled shutdown")
	for _, f := range reps {
		if len(f.transfers) > 0 {
			t.Errorf("a refused election transferred leadership: %v", f.transfers)
		}
	}
}

// With null topics (every partition), partitions that need no election
// are left out, as Kafka leaves them, and so are raft partitions from an
// unclean election.
func TestElectLeaders_AllLeavesOutWhatNeedsNoElection(t *testing.T) {
	reps := []*fakeReplication{newFakeReplication(t, 1), newFakeReplication(t, 1), newFakeReplication(t, 1)}
	n := newUnitNode(t, "t", nil, reps...)
	applyMeta(t, n, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 2, Alive: false}})
	resp := serveElect(t, n, electRequest(2, electPreferred, nil))
	if _, _, ok := electResult(resp, "t", preferredPartition(t, n, "t", 1)); ok {
		t.Errorf("the partition its preferred replica leads is in the answer: %+v", resp.Topics)
	}
	wantElect(t, resp, "t", preferredPartition(t, n, "t", 2), kerr.PreferredLeaderNotAvailable, "")
	if resp = serveElect(t, n, electRequest(2, electUnclean, nil)); len(resp.Topics) != 0 {
		t.Errorf("unclean election of every partition, all raft: answered %+v, want nothing", resp.Topics)
	}
}

// An ElectLeaders that times out waiting for a raft leader answers
// REQUEST_TIMED_OUT or LEADER_NOT_AVAILABLE, both retriable, within its
// timeout.
func TestElectLeaders_NoRaftLeaderKnown(t *testing.T) {
	reps := []*fakeReplication{newFakeReplication(t, 1), newFakeReplication(t, 1), newFakeReplication(t, 1)}
	n := newUnitNode(t, "t", nil, reps...)
	p := preferredPartition(t, n, "t", 2)
	reps[p].setLeadership(leadership{Settling: true})
	r := electRequest(2, electPreferred, map[string][]int32{"t": {p}})
	r.TimeoutMillis = 300
	start := time.Now()
	resp := serveElect(t, n, r)
	code, msg, _ := electResult(resp, "t", p)
	if err := kerr.ErrorForCode(code); err != kerr.LeaderNotAvailable && err != kerr.RequestTimedOut {
		t.Errorf("no leader known: %v (%s), want LEADER_NOT_AVAILABLE or REQUEST_TIMED_OUT", err, msg)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("answered after %s, past its 300 ms timeout", took)
	}
}
