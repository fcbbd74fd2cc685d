package broker

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetrics_ProduceOutcomesAfterApply checks that the produce metrics
// count what the client was told: an idempotent batch refused at apply
// (a sequence gap) is counted under its error code, not as a success, and
// every proposed batch is counted.
func TestMetrics_ProduceOutcomesAfterApply(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	createTopic(t, c.client(), "m", 1, 3)
	leader := leaderOfPartition(t, c, "m", 0)
	const pid = 5
	var codes []int16
	for _, b := range [][]byte{testBatch(t, pid, 0, 0, "a"), testBatch(t, pid, 0, 7, "gap")} {
		code, _ := produceCode(rawRequest(t, c, leader, produceRequest("m", 0, -1, b)))
		codes = append(codes, code)
	}
	if want := []int16{0, kerr.OutOfOrderSequenceNumber.Code}; codes[0] != want[0] || codes[1] != want[1] {
		t.Skipf("answers %v, not %v: leadership moved during the test", codes, want)
	}
	m := c.nodes[leader].metrics
	ok := counterValue(t, m.produced.WithLabelValues("0"))
	gap := counterValue(t, m.produced.WithLabelValues(strconv.Itoa(int(kerr.OutOfOrderSequenceNumber.Code))))
	if ok != 1 || gap != 1 {
		t.Errorf("produce partitions counted: %v ok and %v OUT_OF_ORDER_SEQUENCE_NUMBER, want 1 and 1", ok, gap)
	}
	if got := counterValue(t, m.requests.WithLabelValues("Produce", "response")); got != 2 {
		t.Errorf(`raftq_kafka_requests_total{api="Produce",outcome="response"} = %v, want the 2 answered requests`, got)
	}
	if got := counterValue(t, m.produceRecs); got != 2 {
		t.Errorf("raftq_produce_batches_total = %v, want 2 batches proposed", got)
	}
	if n, sum := histogramCount(t, m.replicate.WithLabelValues("applied")); n != 1 || sum <= 0 {
		t.Errorf("raftq_produce_replicate_seconds{until=applied}: %d observations summing %gs, want the one answered batch", n, sum)
	}
}

// TestMetrics_ReplicateUntilAppended: an acks=1 batch whose offset the
// leader knows beforehand is answered once durable in the leader's WAL,
// and its time is counted under until="appended". A fresh partition may
// not give the projection for the first batch (its no-op not yet
// applied), so up to ten are sent, one at a time.
func TestMetrics_ReplicateUntilAppended(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	createTopic(t, cl, "r1", 1, 3)
	m := c.nodes[leaderOfPartition(t, c, "r1", 0)].metrics
	sent := 0
	for ; sent < 10 && histCount(t, m.replicate.WithLabelValues("appended")) == 0; sent++ {
		produceSync(t, cl, "r1", 0, "v")
	}
	appended := histCount(t, m.replicate.WithLabelValues("appended"))
	applied := histCount(t, m.replicate.WithLabelValues("applied"))
	if appended != 1 || appended+applied != uint64(sent) {
		t.Fatalf("after %d acks=1 batches: %d counted until appended, %d until applied; want one appended and each batch once", sent, appended, applied)
	}
}

func histCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	n, _ := histogramCount(t, o)
	return n
}

func histogramCount(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetrics_WALFsyncs: the node exports its durable saves and the WAL
// fsyncs made for them; on the shared WAL, saves of several groups share
// fsyncs, so there are never more fsyncs than saves.
func TestMetrics_WALFsyncs(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "w", 4, 3)
	for p := range int32(4) {
		produceSync(t, cl, "w", p, "a", "b")
	}
	families, err := c.nodes[1].metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if len(f.GetMetric()) == 1 && f.GetMetric()[0].GetCounter() != nil {
			got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	saves, fsyncs := got["raftq_raft_durable_saves_total"], got["raftq_wal_fsyncs_total"]
	if fsyncs == 0 || saves < fsyncs {
		t.Errorf("durable saves %v, WAL fsyncs %v: want some fsyncs, and no more than saves", saves, fsyncs)
	}
}
