package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// These tests serve Fetch and ListOffsets from fake replications
// (replication_fake_test.go), without raft or the network.

// unitFetch serves one fetch of partition 0 of "t".
func unitFetch(t *testing.T, n *Node, offset int64, epoch int32, mod func(*kmsg.FetchRequest)) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchRequest("t", 0, offset, epoch)
	if mod != nil {
		mod(req)
	}
	return fetchPart(n.fetch(context.Background(), req))
}

func commitValues(t *testing.T, f *fakeReplication, values ...string) {
	t.Helper()
	if _, err := f.commit(testBatch(t, -1, 0, 0, values...)); err != nil {
		t.Fatal(err)
	}
}

func TestFetch_ReadsUpToTheHighWatermark(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a", "b")
	// A batch in the log but not committed: no consumer may see it.
	if _, _, err := f.log.Append(testBatch(t, -1, 0, 0, "c"), 1); err != nil {
		t.Fatal(err)
	}
	sp := unitFetch(t, n, 0, -1, nil)
	if sp.ErrorCode != 0 || sp.HighWatermark != 2 || sp.LastStableOffset != 2 || sp.LogStartOffset != 0 {
		t.Fatalf("fetch: %v, hw %d, lso %d, start %d; want hw 2", kerr.ErrorForCode(sp.ErrorCode), sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset)
	}
	if got := recordsIn(t, sp.RecordBatches); got != 2 {
		t.Errorf("fetch returned %d records, want the 2 below the high watermark", got)
	}
}

func recordsIn(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		info, err := partition.ParseBatchHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		n += int(info.NumRecords)
		b = b[info.Size:]
	}
	return n
}

// A fetch at the high watermark waits until a commit moves it.
func TestFetch_LongPollWakesOnCommit(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a")
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		done <- unitFetch(t, n, 1, -1, func(r *kmsg.FetchRequest) { r.MaxWaitMillis = 30_000 })
	}()
	commitValues(t, f, "b")
	select {
	case sp := <-done:
		if sp.ErrorCode != 0 || sp.HighWatermark != 2 || recordsIn(t, sp.RecordBatches) != 1 {
			t.Fatalf("long poll answered %v, hw %d, %d records; want the new record", kerr.ErrorForCode(sp.ErrorCode), sp.HighWatermark, recordsIn(t, sp.RecordBatches))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not wake on the commit")
	}
}

func TestFetch_OffsetChecks(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a", "b", "c")
	if err := f.log.AdvanceStart(1); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		offset   int64
		lead     leadership
		caughtUp bool
		want     int16
	}{
		{"below the log start", 0, leadership{Leader: 1, Epoch: 1, IsLeader: true}, true, kerr.OffsetOutOfRange.Code},
		{"at the log start", 1, leadership{Leader: 1, Epoch: 1, IsLeader: true}, true, 0},
		{"above the hw, caught-up leader", 4, leadership{Leader: 1, Epoch: 1, IsLeader: true}, true, kerr.OffsetOutOfRange.Code},
		{"above the hw, leader not caught up", 4, leadership{Leader: 1, Epoch: 1, IsLeader: true}, false, kerr.OffsetNotAvailable.Code},
		{"above the hw, follower", 4, leadership{Leader: 2, Epoch: 1}, true, kerr.OffsetNotAvailable.Code},
	}
	for _, c := range cases {
		f.setLeadership(c.lead)
		f.mu.Lock()
		f.caughtUp = c.caughtUp
		f.mu.Unlock()
		if sp := unitFetch(t, n, c.offset, -1, func(r *kmsg.FetchRequest) { r.MaxWaitMillis = 0 }); sp.ErrorCode != c.want {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(sp.ErrorCode), kerr.ErrorForCode(c.want))
		}
	}
}

func TestFetch_LeaderEpochChecks(t *testing.T) {
	f := newFakeReplication(t, 1)
	f.setLeadership(leadership{Leader: 1, Epoch: 5, IsLeader: true})
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a")
	for _, c := range []struct {
		epoch int32
		want  *kerr.Error
	}{{4, kerr.FencedLeaderEpoch}, {6, kerr.UnknownLeaderEpoch}} {
		if sp := unitFetch(t, n, 0, c.epoch, nil); sp.ErrorCode != c.want.Code {
			t.Errorf("epoch %d against 5: %v, want %v", c.epoch, kerr.ErrorForCode(sp.ErrorCode), c.want)
		}
	}
	for _, epoch := range []int32{5, -1} {
		if sp := unitFetch(t, n, 0, epoch, nil); sp.ErrorCode != 0 || recordsIn(t, sp.RecordBatches) != 1 {
			t.Errorf("epoch %d against 5: %v, want the record", epoch, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
}

func unitListOffset(t *testing.T, n *Node, ts int64, epoch int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return result(t, n.serveListOffsets(nil, &kafka.Request{Body: req})).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func TestListOffsets_FromTheLeader(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a", "b")
	f.mu.Lock()
	f.epochs = append(f.epochs, partition.EpochStart{Epoch: 3, StartOffset: 2})
	f.mu.Unlock()
	f.setLeadership(leadership{Leader: 1, Epoch: 3, IsLeader: true})
	commitValues(t, f, "c")
	for _, c := range []struct {
		name      string
		ts        int64
		offset    int64
		epochWant int32
	}{{"earliest", partition.ListEarliest, 0, 1}, {"latest", partition.ListLatest, 3, 3}} {
		sp := unitListOffset(t, n, c.ts, -1)
		if sp.ErrorCode != 0 || sp.Offset != c.offset || sp.LeaderEpoch != c.epochWant {
			t.Errorf("%s: %v, offset %d epoch %d; want %d at epoch %d", c.name, kerr.ErrorForCode(sp.ErrorCode), sp.Offset, sp.LeaderEpoch, c.offset, c.epochWant)
		}
	}
	if sp := unitListOffset(t, n, partition.ListLatest, 2); sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("stale epoch: %v, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(sp.ErrorCode))
	}
	f.setLeadership(leadership{Leader: 2, Epoch: 3})
	if sp := unitListOffset(t, n, partition.ListLatest, -1); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("on a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// A leader not yet caught up in its epoch answers latest with
// OFFSET_NOT_AVAILABLE, which clients retry, rather than a high watermark
// that may be below its predecessor's; earliest needs no high watermark.
func TestListOffsets_LatestWaitsForTheLeaderToCatchUp(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commitValues(t, f, "a")
	f.mu.Lock()
	f.caughtUp = false
	f.mu.Unlock()
	if sp := unitListOffset(t, n, partition.ListLatest, -1); sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Errorf("latest before caught up: %v at %d, want OFFSET_NOT_AVAILABLE", kerr.ErrorForCode(sp.ErrorCode), sp.Offset)
	}
	if sp := unitListOffset(t, n, partition.ListEarliest, -1); sp.ErrorCode != 0 || sp.Offset != 0 {
		t.Errorf("earliest before caught up: %v at %d, want 0", kerr.ErrorForCode(sp.ErrorCode), sp.Offset)
	}
	f.mu.Lock()
	f.caughtUp = true
	f.mu.Unlock()
	if sp := unitListOffset(t, n, partition.ListLatest, -1); sp.ErrorCode != 0 || sp.Offset != 1 {
		t.Errorf("latest once caught up: %v at %d, want 1", kerr.ErrorForCode(sp.ErrorCode), sp.Offset)
	}
}
