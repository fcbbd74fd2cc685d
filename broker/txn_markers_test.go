package broker

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These serve WriteTxnMarkers from fake replications: the request
// handling on its own.

func unitMarkers(t *testing.T, n *Node, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	t.Helper()
	return result(t, n.writeTxnMarkers(context.Background(), req)).(*kmsg.WriteTxnMarkersResponse)
}

// markerCodes returns each partition's code of a one-marker response, by
// topic, in request order.
func markerCodes(t *testing.T, resp *kmsg.WriteTxnMarkersResponse) map[string][]int16 {
	t.Helper()
	if len(resp.Markers) != 1 {
		t.Fatalf("%d markers answered, want 1", len(resp.Markers))
	}
	out := map[string][]int16{}
	for _, rt := range resp.Markers[0].Topics {
		codes := []int16{}
		for _, p := range rt.Partitions {
			codes = append(codes, p.ErrorCode)
		}
		out[rt.Topic] = codes
	}
	return out
}

func TestWriteTxnMarkers_BadInput(t *testing.T) {
	f0, f1 := newFakeReplication(t, 1), newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f0, f1)
	none, unknown := int16(0), kerr.UnknownTopicOrPartition.Code
	for _, tc := range []struct {
		name  string
		parts map[string][]int32
		want  map[string][]int16
	}{
		{"unknown topic", map[string][]int32{"nope": {0}}, map[string][]int16{"nope": {unknown}}},
		{"empty topic name", map[string][]int32{"": {0}}, map[string][]int16{"": {unknown}}},
		{"negative partition", map[string][]int32{"t": {-1}}, map[string][]int16{"t": {unknown}}},
		{"partition past the last", map[string][]int32{"t": {2}}, map[string][]int16{"t": {unknown}}},
		{"no partitions", map[string][]int32{"t": {}}, map[string][]int16{"t": {}}},
		{"mixed", map[string][]int32{"t": {1, -7, 0, 9}, "nope": {0}}, map[string][]int16{"t": {none, unknown, none, unknown}, "nope": {unknown}}},
		{"same partition twice", map[string][]int32{"t": {0, 0}}, map[string][]int16{"t": {none, none}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := markerCodes(t, unitMarkers(t, n, markersRequest(42, 0, true, tc.parts)))
			for topic, want := range tc.want {
				if !slices.Equal(got[topic], want) {
					t.Errorf("%s: codes %v, want %v", topic, got[topic], want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("answered topics %v, want %v", got, tc.want)
			}
		})
	}
	if resp := unitMarkers(t, n, kmsg.NewPtrWriteTxnMarkersRequest()); len(resp.Markers) != 0 {
		t.Errorf("empty request answered %+v", resp.Markers)
	}
	// Appended markers are control batches of the producer, one per
	// partition answered NONE.
	if got, want := f0.log.EndOffset()+f1.log.EndOffset(), int64(4); got != want {
		t.Errorf("%d markers in the logs, want %d", got, want)
	}
	f0.setLeadership(leadership{Leader: 2, Epoch: 2})
	if got := markerCodes(t, unitMarkers(t, n, markersRequest(42, 0, false, map[string][]int32{"t": {0}}))); !slices.Equal(got["t"], []int16{kerr.NotLeaderForPartition.Code}) {
		t.Errorf("marker to a follower: %v, want NOT_LEADER_OR_FOLLOWER", got["t"])
	}
}

// FuzzWriteTxnMarkers decodes arbitrary bytes as a WriteTxnMarkers
// request and serves it: the answer mirrors the request's markers,
// topics and partitions, each with a code Kafka gives a marker.
func FuzzWriteTxnMarkers(f *testing.F) {
	for _, parts := range []map[string][]int32{{"t": {0}}, {"t": {-1, 1, 0}}, {"": {}}, {"x": {2147483647}}} {
		f.Add(markersRequest(7, 3, true, parts).AppendTo(nil))
		f.Add(markersRequest(-1, -1, false, parts).AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(1)
		if err := req.ReadFrom(body); err != nil || len(req.Markers) > 16 {
			return
		}
		fr := newFakeReplication(t, 1)
		n := newUnitNode(t, "t", nil, fr)
		resp := unitMarkers(t, n, req)
		allowed := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code, kerr.InvalidRecord.Code,
			kerr.CorruptMessage.Code, kerr.NotLeaderForPartition.Code}
		if len(resp.Markers) != len(req.Markers) {
			t.Fatalf("%d markers answered, want %d", len(resp.Markers), len(req.Markers))
		}
		for i, m := range req.Markers {
			sm := resp.Markers[i]
			if sm.ProducerID != m.ProducerID || len(sm.Topics) != len(m.Topics) {
				t.Fatalf("marker %d answered %+v for %+v", i, sm, m)
			}
			for j, mt := range m.Topics {
				if len(sm.Topics[j].Partitions) != len(mt.Partitions) {
					t.Fatalf("topic %q: %d partitions answered, want %d", mt.Topic, len(sm.Topics[j].Partitions), len(mt.Partitions))
				}
				for k, p := range sm.Topics[j].Partitions {
					if p.Partition != mt.Partitions[k] || !slices.Contains(allowed, p.ErrorCode) {
						t.Errorf("topic %q partition %d: %v", mt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
		}
	})
}
