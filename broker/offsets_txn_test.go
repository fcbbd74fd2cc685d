package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
)

// groupCoordinatorAddr waits until some node coordinates group and
// returns its Kafka address.
func groupCoordinatorAddr(t *testing.T, c *testCluster, group string) string {
	t.Helper()
	var addr string
	eventually(t, "a group coordinator for "+group, func() bool {
		for id, n := range c.nodes {
			if _, code := n.groupCoordinator(group); code == 0 {
				addr = c.cfgs[id].KafkaAddr
				return true
			}
		}
		return false
	})
	return addr
}

// txnOffsetCommit sends a TxnOffsetCommit v3 of one offset and returns
// its code.
func (x *txnClient) txnOffsetCommit(addr, group string, gen int32, member, topic string, p int32, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(3)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = x.id, group, x.pid, x.ep
	req.Generation, req.MemberID = gen, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rawKafka(x.t, addr, req).(*kmsg.TxnOffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffset asks for one committed offset with OffsetFetch v8.
func fetchOffset(t *testing.T, addr, group, topic string, p int32, requireStable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	req.RequireStable = requireStable
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, []int32{p}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	rg := rawKafka(t, addr, req).(*kmsg.OffsetFetchResponse).Groups[0]
	if rg.ErrorCode != 0 {
		return -1, rg.ErrorCode
	}
	rp := rg.Topics[0].Partitions[0]
	return rp.Offset, rp.ErrorCode
}

// TestTxnOffset_RawCommitAndRequireStable drives a transaction's offsets
// over the raw protocol: they are pending (require_stable answers
// UNSTABLE_OFFSET_COMMIT, a plain fetch the old commit) until the
// transaction's marker reaches the group's offsets partition; an abort
// drops them; bad input gets Kafka's codes.
func TestTxnOffset_RawCommitAndRequireStable(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.OffsetsPartitions, cfg.TransactionPartitions = 2, 2 })
	cl := c.client()
	createTopic(t, cl, "tos", 1, 3)
	const group = "tos-group"
	gaddr := groupCoordinatorAddr(t, c, group)
	if err := kadm.NewClient(cl).CommitAllOffsets(testCtx(t), group, kadm.OffsetsFromRecords(kgo.Record{Topic: "tos", Partition: 0, Offset: 2})); err != nil {
		t.Fatalf("plain commit: %v", err)
	}
	coord := txnCoordinatorNode(t, c, 1, "tos-tx")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tos-tx"}
	x.initUntilDone(60000)

	for i, tc := range []struct {
		commit bool
		want   int64
	}{{true, 10}, {false, 10}} {
		if code := x.addOffsets(3, group); code != 0 {
			t.Fatalf("round %d: add offsets: %v", i, kerr.ErrorForCode(code))
		}
		if code := x.txnOffsetCommit(gaddr, group, -1, "", "tos", 0, int64(10+5*i)); code != 0 {
			t.Fatalf("round %d: txn offset commit: %v", i, kerr.ErrorForCode(code))
		}
		if _, code := fetchOffset(t, gaddr, group, "tos", 0, true); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("round %d: require_stable fetch with a transaction open: %v, want UNSTABLE_OFFSET_COMMIT", i, kerr.ErrorForCode(code))
		}
		before := int64(3) // OffsetsFromRecords commits the next offset
		if i > 0 {
			before = 10
		}
		if got, code := fetchOffset(t, gaddr, group, "tos", 0, false); code != 0 || got != before {
			t.Fatalf("round %d: plain fetch = %d (%v), want the committed %d", i, got, kerr.ErrorForCode(code), before)
		}
		if code := x.endTxn(3, tc.commit); code != 0 {
			t.Fatalf("round %d: end txn: %v", i, kerr.ErrorForCode(code))
		}
		var got int64
		var code int16
		eventually(t, "a stable offset", func() bool {
			got, code = fetchOffset(t, gaddr, group, "tos", 0, true)
			return code == 0
		})
		if got != tc.want {
			t.Fatalf("round %d (commit %v): offset %d, want %d", i, tc.commit, got, tc.want)
		}
	}

	// KIP-447's checks and a fenced epoch.
	if code := x.addOffsets(3, group); code != 0 {
		t.Fatalf("add offsets: %v", kerr.ErrorForCode(code))
	}
	for _, bad := range []struct {
		name   string
		gen    int32
		member string
		want   *kerr.Error
	}{
		{"unknown member", 1, "nobody", kerr.UnknownMemberID},
		{"generation without a member", 3, "", kerr.IllegalGeneration},
	} {
		if code := x.txnOffsetCommit(gaddr, group, bad.gen, bad.member, "tos", 0, 99); code != bad.want.Code {
			t.Errorf("%s: %v, want %v", bad.name, kerr.ErrorForCode(code), bad.want)
		}
	}
	if code := x.txnOffsetCommit(gaddr, group, -1, "", "nope", 0, 99); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if code := x.txnOffsetCommit(gaddr, group, -1, "", "tos", 0, 20); code != 0 {
		t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(code))
	}
	zombie := *x
	zombie.ep--
	if code := zombie.txnOffsetCommit(gaddr, group, -1, "", "tos", 0, 21); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("stale epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	for id, n := range c.nodes {
		if addr := c.cfgs[id].KafkaAddr; addr != gaddr {
			if _, code := n.groupCoordinator(group); code == 0 {
				continue // leadership moved; the check below would not hold
			}
			if code := x.txnOffsetCommit(addr, group, -1, "", "tos", 0, 22); code != kerr.NotCoordinator.Code {
				t.Errorf("node %d: %v, want NOT_COORDINATOR", id, kerr.ErrorForCode(code))
			}
		}
	}
	// A marker for the group's offsets partition at a node that does not
	// lead it is refused, and changes nothing there.
	for id, n := range c.nodes {
		if addr := c.cfgs[id].KafkaAddr; addr != gaddr {
			if n.replicaFor(groups.OffsetsTopic, groups.PartitionFor(group, 2)).offsets.group.Leadership().IsLeader {
				t.Fatalf("node %d leads the group's offsets partition now: the test cannot go on", id)
			}
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed = x.pid, x.ep, true
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "__consumer_offsets", []int32{groups.PartitionFor(group, 2)}
			m.Topics = append(m.Topics, mt)
			req.Markers = append(req.Markers, m)
			resp := rawKafka(t, addr, req).(*kmsg.WriteTxnMarkersResponse)
			if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
				t.Errorf("marker at node %d, not the leader: %v, want NOT_LEADER_OR_FOLLOWER", id, kerr.ErrorForCode(code))
			}
		}
	}
	if _, code := fetchOffset(t, gaddr, group, "tos", 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after markers at followers: %v, want UNSTABLE_OFFSET_COMMIT still", kerr.ErrorForCode(code))
	}
	if code := x.endTxn(3, true); code != 0 {
		t.Fatalf("end txn: %v", kerr.ErrorForCode(code))
	}
	eventually(t, "the third transaction's offset", func() bool {
		got, code := fetchOffset(t, gaddr, group, "tos", 0, true)
		return code == 0 && got == 20
	})
}

// TestTxnOffset_GroupTransactSession runs franz-go's consume-transform-
// produce from tin to tout: each committed session leaves exactly one
// transformed record per input record and the group's offsets at tin's
// ends; an aborted one leaves nothing a read_committed consumer sees
// and the offsets where they were.
func TestTxnOffset_GroupTransactSession(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.OffsetsPartitions, cfg.TransactionPartitions = 2, 2
		cfg.GroupInitialRebalanceDelay = 0
	})
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "tin", 2, 3)
	createTopic(t, cl, "tout", 2, 3)
	const group = "ctp"
	ctx := testCtx(t)
	produce := func(prefix string, n int) {
		for i := range n {
			produceSync(t, cl, "tin", int32(i%2), fmt.Sprintf("%s%d", prefix, i))
		}
	}
	produce("a", 10)

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("ctp-tx"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics("tin"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionTimeout(20e9), kgo.RetryTimeout(30e9))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)

	// round consumes until want input records were transformed in one
	// or more transactions ended with how, and returns what it consumed.
	round := func(want int, prefix string, how kgo.TransactionEndTry) []string {
		t.Helper()
		var seen []string
		for len(seen) < want {
			pctx, cancel := context.WithTimeout(ctx, 5e9)
			fs := sess.PollFetches(pctx)
			cancel()
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %v of %d", seen, want)
			}
			if err := sess.Begin(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			var batch []string
			fs.EachRecord(func(r *kgo.Record) {
				batch = append(batch, string(r.Value))
				sess.Produce(ctx, &kgo.Record{Topic: "tout", Partition: r.Partition, Value: []byte(prefix + string(r.Value))}, nil)
			})
			committed, err := sess.End(ctx, how)
			if err != nil {
				t.Fatalf("end: %v", err)
			}
			if how == kgo.TryCommit && !committed && len(batch) > 0 {
				continue // the session aborted and will consume them again
			}
			seen = append(seen, batch...)
		}
		return seen
	}
	adm := kadm.NewClient(cl)
	// stableOffsets waits until the group has no pending offsets in tin
	// (the last transaction's marker reached its offsets partition: a
	// require_stable fetch succeeds) and returns its offsets.
	stableOffsets := func() map[int32]int64 {
		t.Helper()
		out := map[int32]int64{}
		for p := range int32(2) {
			eventually(t, fmt.Sprintf("a stable offset for tin-%d", p), func() bool {
				got, code := fetchOffset(t, groupCoordinatorAddr(t, c, group), group, "tin", p, true)
				out[p] = got
				return code == 0
			})
		}
		return out
	}
	checkOffsets := func(what string) {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, "tin")
		if err != nil || ends.Error() != nil {
			t.Fatalf("list end offsets: %v %v", err, ends.Error())
		}
		offs := stableOffsets()
		ends.Each(func(e kadm.ListedOffset) {
			if got := offs[e.Partition]; got != e.Offset {
				t.Errorf("%s: committed offset of tin-%d = %d, want its end %d", what, e.Partition, got, e.Offset)
			}
		})
	}

	if got := round(10, "T-", kgo.TryCommit); len(got) != 10 {
		t.Fatalf("first round consumed %v", got)
	}
	checkOffsets("after the commit")

	// An aborted session: the group's offsets stay, the output is never
	// visible; the records are consumed again by the next commit.
	produce("b", 4)
	round(4, "X-", kgo.TryAbort)
	if got := stableOffsets(); got[0] != 5 || got[1] != 5 {
		t.Fatalf("offsets after the abort = %v, want tin-0 and tin-1 at 5", got)
	}
	if got := round(4, "T-", kgo.TryCommit); len(got) != 4 {
		t.Fatalf("third round consumed %v", got)
	}
	checkOffsets("after the abort and a commit")

	// tout, read_committed: exactly one T- record per input record, no X-.
	rc := c.client(kgo.ConsumeTopics("tout"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int{}
	for n := 0; n < 14; {
		pctx, cancel := context.WithTimeout(ctx, 10e9)
		fs := rc.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || pctx.Err() != nil && fs.NumRecords() == 0 {
			t.Fatalf("read_committed read %v of 14", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			if strings.HasPrefix(string(r.Value), "T-") {
				n++
			}
		})
	}
	for v, k := range got {
		if !strings.HasPrefix(v, "T-") || k != 1 {
			t.Errorf("read_committed saw %q %d times", v, k)
		}
	}
	for _, v := range []string{"a0", "a9", "b0", "b3"} {
		if got["T-"+v] != 1 {
			t.Errorf("T-%s seen %d times, want 1", v, got["T-"+v])
		}
	}
}

// TestTxnOffset_MarkerTargets: the marker goes to each group's offsets
// partition once, and a group is done only when its partition took it.
func TestTxnOffset_MarkerTargets(t *testing.T) {
	st := &coordinator.State{Topics: map[string]*coordinator.Topic{
		groups.OffsetsTopic: {Name: groups.OffsetsTopic, Partitions: make([]coordinator.Partition, 5)}}}
	txn := txns.PendingTxn{Partitions: txns.Partitions{"a": {0, 1}}, Groups: []string{"g1", "g2", "g3", "g4", "g5", "g6"}}
	all, parts := markerTargets(st, txn)
	var want []int32
	for _, g := range txn.Groups {
		if p := groups.PartitionFor(g, 5); !slices.Contains(want, p) {
			want = append(want, p)
		}
		if parts[g] != groups.PartitionFor(g, 5) {
			t.Fatalf("%s at partition %d, want %d", g, parts[g], groups.PartitionFor(g, 5))
		}
	}
	slices.Sort(want) // sendTxnMarker's Contains searches them
	if !slices.Equal(all["a"], []int32{0, 1}) || !slices.Equal(all[groups.OffsetsTopic], want) {
		t.Fatalf("targets %v, want a 0,1 and offsets %v", all, want)
	}
	done := txns.Partitions{"a": {1}, groups.OffsetsTopic: {parts["g2"]}}
	if len(want) > 1 { // leaders answer in any order
		done[groups.OffsetsTopic] = []int32{want[len(want)-1], parts["g2"]}
	}
	gotParts, gotGroups := splitMarkerDone(done, txn, parts)
	if !slices.Equal(gotParts["a"], []int32{1}) || len(gotParts) != 1 {
		t.Fatalf("done partitions %v, want a-1 only", gotParts)
	}
	for _, g := range txn.Groups {
		if got, want := slices.Contains(gotGroups, g), slices.Contains(done[groups.OffsetsTopic], parts[g]); got != want {
			t.Errorf("group %s done = %v, want %v", g, got, want)
		}
	}
	// Without __consumer_offsets no group holds offsets: all are done.
	_, parts = markerTargets(&coordinator.State{Topics: map[string]*coordinator.Topic{}}, txn)
	if _, gs := splitMarkerDone(txns.Partitions{}, txn, parts); !slices.Equal(gs, txn.Groups) {
		t.Fatalf("without __consumer_offsets done groups %v, want all", gs)
	}
}
