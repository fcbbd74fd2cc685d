package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// gathered returns the value of the node's metric name with exactly these
// labels, and whether it was there.
func gathered(t *testing.T, n *Node, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsAre(m, labels) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func labelsAre(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// The dashboard metrics count what clients produced and fetched, per
// partition; the lag of a group that committed part of a partition; the
// node's leader count; and a request's error by its Kafka name.
func TestDashboardMetrics(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[1]
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond))
	createTopic(t, cl, "dash", 2, 1)
	produceSync(t, cl, "dash", 0, "a", "b", "c")
	produceSync(t, cl, "dash", 1, "d")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dash": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	for got := 0; got < 4 && ctx.Err() == nil; {
		got += len(cons.PollFetches(ctx).Records())
	}
	adm := kadm.NewClient(cl)
	commits := kadm.Offsets{}
	commits.AddOffset("dash", 0, 1, -1)
	if resp, err := adm.CommitOffsets(ctx, "dg", commits); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	p0 := map[string]string{"topic": "dash", "partition": "0"}
	for name, want := range map[string]float64{
		"raftq_partition_records_in_total": 3, "raftq_partition_records_out_total": 3,
	} {
		if got, ok := gathered(t, n, name, p0); !ok || got != want {
			t.Errorf("%s%v = %v (present %v), want %v", name, p0, got, ok, want)
		}
	}
	if in, _ := gathered(t, n, "raftq_partition_bytes_in_total", p0); in < 61 {
		t.Errorf("raftq_partition_bytes_in_total%v = %v, want at least a batch header (61)", p0, in)
	}
	if out, _ := gathered(t, n, "raftq_partition_bytes_out_total", p0); out < 61 {
		t.Errorf("raftq_partition_bytes_out_total%v = %v, want at least a batch header (61)", p0, out)
	}
	if got, _ := gathered(t, n, "raftq_partition_records_in_total", map[string]string{"topic": "dash", "partition": "1"}); got != 1 {
		t.Errorf("records in on partition 1 = %v, want 1", got)
	}
	if got, ok := gathered(t, n, "raftq_consumergroup_lag", map[string]string{"group": "dg", "topic": "dash", "partition": "0"}); !ok || got != 2 {
		t.Errorf("raftq_consumergroup_lag{dg,dash,0} = %v (present %v), want 2 (end 3, committed 1)", got, ok)
	}
	// 2 partitions of dash and the offsets partitions, all led by the one node.
	if got, _ := gathered(t, n, "raftq_leader_partitions", nil); got < 3 {
		t.Errorf("raftq_leader_partitions = %v, want at least 3", got)
	}

	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "dash"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 9, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(1).Request(ctx, req) // to the node: kgo itself refuses a partition not in its metadata
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code == 0 {
		t.Fatal("ListOffsets of partition 9 of a 2-partition topic: no error")
	}
	labels := map[string]string{"api": "ListOffsets", "error": "UNKNOWN_TOPIC_OR_PARTITION"}
	if got, ok := gathered(t, n, "raftq_kafka_request_errors_total", labels); !ok || got != 1 {
		t.Errorf("raftq_kafka_request_errors_total%v = %v (present %v), want 1", labels, got, ok)
	}
}

func TestBatchRecords(t *testing.T) {
	one := testBatch(t, 1, 0, 0, "a")
	if got := batchRecords(one); got != 1 {
		t.Errorf("one batch of 1: %d records", got)
	}
	two := append(append([]byte{}, one...), one...)
	if got := batchRecords(two); got != 2 {
		t.Errorf("two batches of 1: %d records", got)
	}
	if got := batchRecords(two[:len(two)-3]); got != 1 {
		t.Errorf("a batch and a truncated one: %d records, want 1", got)
	}
	if got := batchRecords(nil); got != 0 {
		t.Errorf("nothing: %d records", got)
	}
}

// BenchmarkCountedFetchResponse is what counting error codes adds to
// each Fetch response: a walk of a 16-partition response.
func BenchmarkCountedFetchResponse(b *testing.B) {
	d := newDashboard(prometheus.NewRegistry())
	resp := kmsg.NewPtrFetchResponse()
	for ti := range 2 {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t" + strconv.Itoa(ti)
		for p := range 8 {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.RecordBatches = int32(p), make([]byte, 16<<10)
			if p == 7 {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	p := countedPending{kafka.Ready(resp), d, kmsg.Fetch.Int16()}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = p.Result()
	}
}

// Error codes are found at every depth, by hand and by the compiled walk.
func TestForEachErrorCode(t *testing.T) {
	commit := kmsg.NewPtrOffsetCommitResponse()
	for _, codes := range [][]int16{{0, kerr.RebalanceInProgress.Code}, {kerr.UnknownTopicOrPartition.Code}} {
		rt := kmsg.NewOffsetCommitResponseTopic()
		for _, c := range codes {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.ErrorCode = c
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	produce := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	for _, c := range []int16{kerr.NotLeaderForPartition.Code, 0, kerr.NotLeaderForPartition.Code} {
		pp := kmsg.NewProduceResponseTopicPartition()
		pp.ErrorCode = c
		pt.Partitions = append(pt.Partitions, pp)
	}
	produce.Topics = append(produce.Topics, pt)
	hb := kmsg.NewPtrHeartbeatResponse()
	hb.ErrorCode = kerr.IllegalGeneration.Code
	for _, c := range []struct {
		resp kmsg.Response
		want []int16
	}{
		{commit, []int16{kerr.RebalanceInProgress.Code, kerr.UnknownTopicOrPartition.Code}},
		{produce, []int16{kerr.NotLeaderForPartition.Code, kerr.NotLeaderForPartition.Code}},
		{hb, []int16{kerr.IllegalGeneration.Code}},
		{kmsg.NewPtrApiVersionsResponse(), nil},
	} {
		var got []int16
		for range 2 { // the second walk is the cached one
			got = got[:0]
			forEachErrorCode(c.resp, func(code int16) { got = append(got, code) })
		}
		if len(got) != len(c.want) || (len(got) > 0 && (got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1])) {
			t.Errorf("%T: codes %v, want %v", c.resp, got, c.want)
		}
	}
}
