package broker

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
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
	if got := counterValue(t, m.produceRecs); got != 2 {
		t.Errorf("raftq_produce_batches_total = %v, want 2 batches proposed", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
