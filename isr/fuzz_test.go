package isr

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHandleFetch feeds a leader arbitrary fetch requests: each gets an
// answer that decodes, and the leader keeps committing afterwards.
func FuzzHandleFetch(f *testing.F) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaState.ID = 2
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = [16]byte{7}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 10
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	f.Add(encodeFetchRequest(req))
	f.Add([]byte{0, 15})
	f.Add([]byte{0, 15, 0xff, 0xff, 0xff, 0xff})
	c := newTestCluster(f, 1, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		c.t = t
		resp, err := decodeFetchResponse(c.node(1).m.HandleFetch(2, b, time.Now().Add(10*time.Millisecond)))
		if err != nil {
			t.Fatalf("the answer to %x does not decode: %v", b, err)
		}
		_ = resp
	})
}

// FuzzFollowerAnswer feeds a follower arbitrary fetch answers: none
// panics, and the follower's log only ever holds whole batches the
// leader's protocol allows (AppendFollower checks each).
func FuzzFollowerAnswer(f *testing.F) {
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID = [16]byte{7}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = 1
	rp.RecordBatches = testBatch(-1, 0, "x")
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	f.Add(encodeFetchResponse(resp))
	f.Add([]byte{0, 15, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := decodeFetchResponse(b)
		if err != nil {
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				_ = splitBatches(p.RecordBatches, func([]byte) error { return nil })
			}
		}
	})
}
