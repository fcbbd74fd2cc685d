package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A dead broker leaves Metadata's and DescribeCluster's broker lists, as
// a dead Kafka broker does, so clients stop dialling it; its replicas stay
// in the partitions, offline, and DescribeCluster v2 still names it,
// fenced, when asked. Back, it is listed again.
func TestNode_DeadBrokerIsNotListed(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client()
	createTopic(t, cl, "dead", 1, 3)
	const gone = 3

	c.stop(gone)
	eventually(t, "node 1 to see node 3 dead", func() bool {
		b, ok := c.nodes[1].Metadata().Brokers[gone]
		return ok && !b.Alive
	})
	md := requestFrom[*kmsg.MetadataResponse](t, cl, 1, kmsg.NewPtrMetadataRequest())
	if got := metadataBrokerIDs(md); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("metadata lists brokers %v, want [1 2]", got)
	}
	p := md.Topics[0].Partitions[0]
	if !slices.Contains(p.Replicas, gone) || !slices.Equal(p.OfflineReplicas, []int32{gone}) {
		t.Errorf("partition replicas %v offline %v, want node %d among the replicas and offline", p.Replicas, p.OfflineReplicas, gone)
	}
	if got := clusterBrokers(t, cl, false); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("describe cluster lists %v, want [1 2]", got)
	}
	if got := clusterBrokers(t, cl, true); !slices.Equal(got, []string{"1", "2", "3 fenced"}) {
		t.Errorf("describe cluster with fenced brokers lists %v, want [1 2 3 fenced]", got)
	}

	c.start(gone)
	c.waitBrokers(3)
	md = requestFrom[*kmsg.MetadataResponse](t, cl, 1, kmsg.NewPtrMetadataRequest())
	if got := metadataBrokerIDs(md); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Errorf("after the restart metadata lists brokers %v, want [1 2 3]", got)
	}
}

// requestFrom sends req to node id and returns its answer.
func requestFrom[R kmsg.Response](t *testing.T, cl *kgo.Client, id int32, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Broker(int(id)).Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%s to node %d: %v", kmsg.NameForKey(req.Key()), id, err)
	}
	return resp.(R)
}

func metadataBrokerIDs(md *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// clusterBrokers asks node 1 to describe the cluster (v2) and returns
// its brokers as "id" or "id fenced", in id order.
func clusterBrokers(t *testing.T, cl *kgo.Client, fenced bool) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = fenced // kgo sends v2, the newest both sides know
	resp := requestFrom[*kmsg.DescribeClusterResponse](t, cl, 1, req)
	slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return int(a.NodeID - b.NodeID) })
	var out []string
	for _, b := range resp.Brokers {
		s := fmt.Sprint(b.NodeID)
		if b.IsFenced {
			s += " fenced"
		}
		out = append(out, s)
	}
	return out
}
