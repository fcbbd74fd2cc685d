package broker

import (
	"bytes"
	"errors"

	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// These move partitions between the nodes of in-process clusters under
// load, through the Kafka API (kadm), as an operator would.

// createAssigned creates topic with one partition on replicas.
func createAssigned(t *testing.T, cl *kgo.Client, topic string, configs map[string]string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s on %v: %v", topic, replicas, err)
	}
}

// ackLoad produces to partition 0 of a topic until stopped, keeping
// what was acknowledged and what failed.
type ackLoad struct {
	mu     sync.Mutex
	acks   []acked
	failed []error
	stopCh chan struct{}
	done   chan struct{}
}

func startLoad(t *testing.T, cl *kgo.Client, topic string) *ackLoad {
	l := &ackLoad{stopCh: make(chan struct{}), done: make(chan struct{})}
	ctx := testCtx(t)
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stopCh:
				return
			default:
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}, func(r *kgo.Record, err error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.failed = append(l.failed, err)
					return
				}
				l.acks = append(l.acks, acked{string(r.Value), r.Offset})
			})
			if i%20 == 19 {
				time.Sleep(time.Millisecond) // a steady load, not a flood of buffered records
			}
		}
	}()
	return l
}

func (l *ackLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// stop ends the load, flushes, and fails t if any record failed.
func (l *ackLoad) stop(t *testing.T, cl *kgo.Client) []acked {
	t.Helper()
	close(l.stopCh)
	<-l.done
	if err := cl.Flush(testCtx(t)); err != nil {
		t.Fatalf("flush: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		t.Errorf("%d records failed during the move (first: %v)", len(l.failed), l.failed[0])
	}
	return l.acks
}

// move asks for topic partition 0 to move to replicas (nil: cancel).
func move(t *testing.T, adm *kadm.Client, topic string, replicas []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, replicas)
	res, err := adm.AlterPartitionAssignments(testCtx(t), req)
	if err == nil {
		err = res[topic][0].Err
	}
	if err != nil {
		t.Fatalf("move %s to %v: %v (%s)", topic, replicas, err, res[topic][0].ErrMessage)
	}
}

// awaitMoved waits until no move of topic is listed and every node's
// metadata has replicas for its partition 0.
func (c *testCluster) awaitMoved(t *testing.T, adm *kadm.Client, topic string, replicas ...uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s to move to %v", topic, replicas), func() bool {
		moves, err := adm.ListPartitionReassignments(testCtx(t), kadm.TopicsSet{topic: {0: {}}})
		if err != nil || len(moves) > 0 {
			return false
		}
		for _, n := range c.nodes {
			if p := n.Metadata().Topics[topic].Partitions[0]; !slices.Equal(p.Replicas, replicas) || p.Moving() {
				return false
			}
		}
		return true
	})
}

// checkMoved checks the end of a move: the replicas outside the target
// dropped their copy, those in it hold the same bytes, and every
// acknowledged record reads back once, in order.
func (c *testCluster) checkMoved(t *testing.T, topic string, acks []acked, target, removed []uint64) {
	t.Helper()
	for _, id := range removed {
		eventually(t, fmt.Sprintf("node %d to drop its copy of %s", id, topic), func() bool {
			_, err := os.Stat(c.nodes[id].logDir(topic, 0))
			return os.IsNotExist(err)
		})
	}
	same := func() (bool, string) {
		first := segmentBytes(t, c.nodes[target[0]].logDir(topic, 0))
		note := fmt.Sprintf("node %d: %d bytes", target[0], len(first))
		ok := len(first) > 0
		for _, id := range target[1:] {
			b := segmentBytes(t, c.nodes[id].logDir(topic, 0))
			note += fmt.Sprintf(", node %d: %d bytes", id, len(b))
			ok = ok && bytes.Equal(first, b)
		}
		return ok, note
	}
	deadline := time.Now().Add(30 * time.Second)
	for ok, note := same(); !ok; ok, note = same() {
		if time.Now().After(deadline) {
			for _, id := range target {
				if r := c.nodes[id].replicaByGroup(c.nodes[id].Metadata().Topics[topic].Partitions[0].Group); r != nil && r.Raft() != nil {
					note += fmt.Sprintf("\nnode %d: %+v", id, r.Raft().Status())
				}
			}
			for _, id := range target {
				note += fmt.Sprintf("\nnode %d offline: %v", id, c.nodes[id].offlineReplicas())
			}
			t.Fatalf("the target replicas do not hold the same bytes: %s", note)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs := consumeAll(t, c, topic, 0, int(acks[len(acks)-1].offset)+1)
	checkAcked(t, recs, acks)
}

func loadClient(c *testCluster) *kgo.Client {
	return c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(2000),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
}

// A raft partition moves off every one of its replicas, its leader
// included, while acks=all writes go on: none fails, none is lost.
func TestReassign_RaftMovesUnderLoad(t *testing.T) {
	c := newTestCluster(t, 5, nil)
	cl := loadClient(c)
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "mv", nil, 1, 2, 3)
	load := startLoad(t, cl, "mv")
	eventually(t, "records before the move", func() bool { return load.acked() >= 300 })
	move(t, adm, "mv", []int32{4, 5, 2})
	c.awaitMoved(t, adm, "mv", 4, 5, 2)
	n := load.acked()
	eventually(t, "records after the move", func() bool { return load.acked() >= n+300 })
	acks := load.stop(t, cl)
	c.checkMoved(t, "mv", acks, []uint64{4, 5, 2}, []uint64{1, 3})
	if st := c.nodes[4].replicaByGroup(c.nodes[4].Metadata().Topics["mv"].Partitions[0].Group).Raft().Status(); !sameIDs(st.Voters, []uint64{2, 4, 5}) || len(st.Learners) > 0 {
		t.Errorf("raft configuration %v learners %v, want voters 2,4,5", st.Voters, st.Learners)
	}
}

// A move whose new replica is down waits for it; a cancel then leads back
// to the original replicas, and the new replica, once back, drops what it
// had. The leader stops in the middle: its successor carries on.
func TestReassign_RaftCancelWhileStuckAndLeaderRestarts(t *testing.T) {
	c := newTestCluster(t, 4, nil)
	cl := loadClient(c)
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "cx", nil, 1, 2, 3)
	load := startLoad(t, cl, "cx")
	eventually(t, "records before the move", func() bool { return load.acked() >= 300 })
	c.stop(4)
	move(t, adm, "cx", []int32{4, 2, 3})
	gid := c.nodes[1].Metadata().Topics["cx"].Partitions[0].Group
	leader := func() uint64 {
		for id, n := range c.nodes {
			if r := n.replicaByGroup(gid); r != nil && r.Raft().Status().IsLeader() {
				return id
			}
		}
		return 0
	}
	eventually(t, "node 4 to be added as a learner", func() bool {
		l := leader()
		return l != 0 && slices.Contains(c.nodes[l].replicaByGroup(gid).Raft().Status().Learners, 4)
	})
	old := leader()
	c.stop(old)
	c.start(old)
	n := load.acked()
	eventually(t, "records after the leader restarted", func() bool { return load.acked() >= n+300 })
	move(t, adm, "cx", nil) // cancel
	c.awaitMoved(t, adm, "cx", 1, 2, 3)
	c.start(4)
	acks := load.stop(t, cl)
	c.checkMoved(t, "cx", acks, []uint64{1, 2, 3}, []uint64{4})
	l := leader()
	if st := c.nodes[l].replicaByGroup(gid).Raft().Status(); !sameIDs(st.Voters, []uint64{1, 2, 3}) || len(st.Learners) > 0 {
		t.Errorf("raft configuration %v learners %v, want voters 1,2,3", st.Voters, st.Learners)
	}
}

// An ISR partition's new replica fetches, joins the ISR, and the move
// ends in group 0; the old leader hands over.
func TestReassign_ISRMovesUnderLoad(t *testing.T) {
	c := newTestCluster(t, 4, nil)
	cl := loadClient(c)
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "im", map[string]string{"replication.mode": coordinator.ModeISR, "min.insync.replicas": "2"}, 1, 2, 3)
	load := startLoad(t, cl, "im")
	eventually(t, "records before the move", func() bool { return load.acked() >= 300 })
	move(t, adm, "im", []int32{4, 2, 3})
	c.awaitMoved(t, adm, "im", 4, 2, 3)
	n := load.acked()
	eventually(t, "records after the move", func() bool { return load.acked() >= n+300 })
	acks := load.stop(t, cl)
	c.checkMoved(t, "im", acks, []uint64{4, 2, 3}, []uint64{1})
	if p := c.nodes[2].Metadata().Topics["im"].Partitions[0]; p.Leader == 1 || slices.Contains(p.ISR, 1) {
		t.Errorf("partition after the move %+v", p)
	}
}

// Bad requests get Kafka's codes and change nothing.
func TestReassign_BadRequests(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client()
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "bad", nil, 1, 2, 3)
	cases := []struct {
		name     string
		topic    string
		replicas []int32
		want     error
	}{
		{"unknown broker", "bad", []int32{1, 2, 9}, kerr.InvalidReplicaAssignment},
		{"duplicate", "bad", []int32{1, 1, 2}, kerr.InvalidReplicaAssignment},
		{"negative id", "bad", []int32{-1, 2, 3}, kerr.InvalidReplicaAssignment},
		{"empty", "bad", []int32{}, kerr.InvalidReplicaAssignment},
		{"unknown topic", "nope", []int32{1}, kerr.UnknownTopicOrPartition},
		{"cancel without a move", "bad", nil, kerr.NoReassignmentInProgress},
	}
	for _, tc := range cases {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(tc.topic, 0, tc.replicas)
		res, err := adm.AlterPartitionAssignments(testCtx(t), req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := res[tc.topic][0].Err; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if p := c.nodes[1].Metadata().Topics["bad"].Partitions[0]; p.Moving() || !slices.Equal(p.Replicas, []uint64{1, 2, 3}) {
		t.Errorf("partition after refused moves %+v", p)
	}
}

func sameIDs(a, b []uint64) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// Decommissioning a node moves every replica it holds to the others
// under load; removed, it cannot rejoin from the same data directory.
func TestDecommission_EmptiesTheNodeThenRemoves(t *testing.T) {
	c := newTestCluster(t, 4, nil)
	cl := loadClient(c)
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "dc", nil, 4, 1, 2)
	if _, err := adm.CreateTopic(testCtx(t), 6, 3, nil, "dc-more"); err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, cl, "dc")
	eventually(t, "records before the decommission", func() bool { return load.acked() >= 300 })
	propose := func(cmd *coordinator.Command) error {
		res, err := c.nodes[1].ctl.ProposeRetry(testCtx(t), cmd)
		return errors.Join(err, res.Err)
	}
	if err := propose(&coordinator.Command{Decommission: &coordinator.Decommission{ID: 4, On: true}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 4 to hold no replica", func() bool {
		return c.nodes[1].brokerProgress(c.nodes[1].Metadata(), 4).Removable
	})
	n := load.acked()
	eventually(t, "records after the decommission", func() bool { return load.acked() >= n+300 })
	acks := load.stop(t, cl)
	target := c.nodes[1].Metadata().Topics["dc"].Partitions[0].Replicas
	if slices.Contains(target, 4) || len(target) != 3 {
		t.Fatalf("dc-0 on %v after decommissioning 4", target)
	}
	c.checkMoved(t, "dc", acks, target, []uint64{4})
	if err := propose(&coordinator.Command{RemoveBroker: &coordinator.RemoveBroker{ID: 4}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the others to drop node 4 from their peer transports", func() bool {
		return !c.nodes[1].hasPeer(4) && !c.nodes[2].hasPeer(4) && !c.nodes[3].hasPeer(4)
	})
	// The restarted node replays what it had applied. It need not learn
	// of its own removal: the others dropped it from their transports, so
	// it may never hear that the removal committed, nor anything group 0
	// applied after. Its registration, proposed through a member, is
	// refused, and nothing registers it.
	applied := c.nodes[4].Metadata().Index
	c.stop(4)
	c.start(4)
	eventually(t, "node 4 to replay what it had applied", func() bool { return c.nodes[4].Metadata().Index >= applied })
	n4 := c.nodes[4]
	_, peer, admin := n4.Addrs()
	res, err := c.nodes[1].ctl.ProposeRetry(testCtx(t), &coordinator.Command{RegisterBroker: &coordinator.Broker{ID: 4, KafkaAddr: n4.advert,
		PeerAddr: peer, AdminAddr: admin, Incarnation: n4.incarnation, StartID: coordinator.NewStartID()}})
	if err != nil || !errors.Is(res.Err, kerr.InconsistentClusterID) {
		t.Fatalf("registration of the removed node's data directory: %v, %v; want INCONSISTENT_CLUSTER_ID", err, res.Err)
	}
	if _, ok := c.nodes[1].Metadata().Brokers[4]; ok {
		t.Fatal("the removed node registered again from the same data directory")
	}
}

// With the partition balancer on, replicas placed on three of five
// nodes spread to all five, under load, losing nothing.
func TestPartitionBalancer_SpreadsReplicas(t *testing.T) {
	c := newTestCluster(t, 5, func(cfg *Config) {
		cfg.PartitionBalancer = true
		cfg.LeaderBalanceInterval = 200 * time.Millisecond
	})
	cl := loadClient(c)
	for i := range 4 {
		createAssigned(t, cl, fmt.Sprintf("pb%d", i), nil, 1, 2, 3)
	}
	load := startLoad(t, cl, "pb0")
	eventually(t, "nodes 4 and 5 to hold replicas", func() bool {
		s := c.nodes[1].Metadata()
		return len(s.PartitionsOf(4)) > 0 && len(s.PartitionsOf(5)) > 0
	})
	eventually(t, "the balancer to settle", func() bool {
		s := c.nodes[1].Metadata()
		_, more := s.BalanceMove()
		for _, id := range s.BrokerIDs() {
			if slices.ContainsFunc(s.PartitionsOf(id), func(r coordinator.PartitionRef) bool { return r.Partition.Moving() }) {
				return false
			}
		}
		return !more
	})
	acks := load.stop(t, cl)
	recs := consumeAll(t, c, "pb0", 0, int(acks[len(acks)-1].offset)+1)
	checkAcked(t, recs, acks)
}

// The admin API refuses a decommission that would leave fewer brokers
// than a majority of group 0's voters.
func TestDecommission_KeepsAMajorityOfTheMetadataVoters(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	n := c.nodes[1]
	if err := n.checkVotersLeft(3); err != nil {
		t.Fatalf("decommission one of three: %v", err)
	}
	res, err := n.ctl.ProposeRetry(testCtx(t), &coordinator.Command{Decommission: &coordinator.Decommission{ID: 3, On: true}})
	if err = errors.Join(err, res.Err); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 1 to see 3 decommissioned", func() bool { return n.Metadata().Brokers[3].Decommissioned })
	if err := n.checkVotersLeft(2); err == nil {
		t.Fatal("decommissioning a second of three voters' brokers was allowed")
	}
}
