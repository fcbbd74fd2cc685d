package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
)

func groupCluster(t *testing.T) *testCluster {
	t.Helper()
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.OffsetsPartitions = 3
		cfg.GroupMinSessionTimeout = time.Second
		cfg.GroupInitialRebalanceDelay = 200 * time.Millisecond
	})
	return c
}

// coordinatorOf asks node 1 for the group's coordinator.
func coordinatorOf(t *testing.T, c *testCluster, group string) uint64 {
	t.Helper()
	var id uint64
	eventually(t, "a coordinator for "+group, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp := rawRequest(t, c, 1, req).(*kmsg.FindCoordinatorResponse)
		co := resp.Coordinators[0]
		if co.ErrorCode != 0 {
			return false
		}
		id = uint64(co.NodeID)
		_, code := c.nodes[id].groupCoordinator(group)
		return code == 0
	})
	return id
}

func TestNode_GroupConsumersShareAndCommit(t *testing.T) {
	c := groupCluster(t)
	admin := c.client()
	createTopic(t, admin, "gt", 6, 3)
	producer := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []string
	for p := int32(0); p < 6; p++ {
		v := []string{fmt.Sprintf("p%d-a", p), fmt.Sprintf("p%d-b", p)}
		produceSync(t, producer, "gt", p, v...)
		want = append(want, v...)
	}
	ctx := testCtx(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	owners := map[int32]int{}
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < 3; i++ {
		cl := c.client(kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("gt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					owners[r.Partition] = i
					mu.Unlock()
				})
				if err := cl.CommitUncommittedOffsets(cctx); err != nil && cctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			}
		}()
	}
	eventually(t, "every record consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == len(want)
	})
	adm := kadm.NewClient(admin)
	eventually(t, "offsets committed at the end of every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, "g1")
		if err != nil {
			return false
		}
		for p := int32(0); p < 6; p++ {
			if o, ok := offs.Lookup("gt", p); !ok || o.At != 2 {
				return false
			}
		}
		return true
	})
	eventually(t, "a stable group of 3 members sharing the 6 partitions", func() bool {
		described, err := adm.DescribeGroups(ctx, "g1")
		if err != nil {
			return false
		}
		d := described["g1"]
		return d.State == "Stable" && len(d.Members) == 3 && len(d.AssignedPartitions()["gt"]) == 6
	})
	cancel()
	wg.Wait()

	// A heartbeat to a node that is not the coordinator gets NOT_COORDINATOR.
	coord := coordinatorOf(t, c, "g1")
	other := coord%3 + 1
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g1", "someone", 1
	if code := rawRequest(t, c, other, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat to node %d (coordinator %d): code %d, want NOT_COORDINATOR", other, coord, code)
	}
}

func TestNode_FindCoordinatorFollowsOffsetsLeader(t *testing.T) {
	c := groupCluster(t)
	coord := coordinatorOf(t, c, "grp")
	st := c.nodes[1].Metadata()
	idx := groups.PartitionFor("grp", int32(len(st.Topics[groups.OffsetsTopic].Partitions)))
	r := c.nodes[coord].replicaFor(groups.OffsetsTopic, idx)
	if r == nil || !raftOf(r).Status().IsLeader() {
		t.Fatalf("node %d does not lead offsets partition %d", coord, idx)
	}
	// v0 and a transaction key.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey = 0, "grp"
	if resp := rawKafka(t, c.cfgs[2].KafkaAddr, req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || uint64(resp.NodeID) != coord {
		t.Fatalf("v0: code %d node %d, want node %d", resp.ErrorCode, resp.NodeID, coord)
	}
	// A transaction key names the leader of its __transaction_state
	// partition (transactions_test.go tests it further).
	if txc := txnCoordinatorNode(t, c, 2, "tx"); c.nodes[txc].replicaFor(txns.TransactionTopic, txns.PartitionFor("tx", c.cfgs[1].TransactionPartitions)) == nil {
		t.Fatalf("txn key: coordinator %d hosts no replica of the id's transaction partition", txc)
	}
}
