package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/raftq/raftq/jepsen"
)

// TestE2E_CostBench runs one cost load against a real cluster: through
// the load's dialer, on the topic and configs it names, which is gone
// after the load.
func TestE2E_CostBench(t *testing.T) {
	c := e2eCluster(t, 3)
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return c.DialContext(ctx, network, addr)
	}
	l := jepsen.CostLoad{Name: jepsen.CostFixed, Topic: "cost-e2e", Partitions: 2, ReplicationFactor: 3,
		TopicConfigs: map[string]string{"replication.mode": "isr", "min.insync.replicas": "2"}, RecordSize: 100, Producers: 2,
		Rate: 2000, Duration: time.Second, Warmup: 500 * time.Millisecond, Brokers: seeds(c), Dial: dial}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	f, err := costBench(e)(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if f.Records < 1000 || f.Failed != 0 || f.RecordsPerS < 1000 || f.RecordsPerS > 3000 || f.P99ms <= 0 || f.P50ms > f.P99ms {
		t.Errorf("figures %+v, want about 2000 records/s for 1 s", f)
	}
	if f.Setup["topic.replication.mode"] != "isr" || f.Setup["topic.min.insync.replicas"] != "2" || f.Setup["topic.partitions"] != "2" {
		t.Errorf("setup %v", f.Setup)
	}
	if dials.Load() == 0 {
		t.Error("the load did not dial through its dialer")
	}
	md, err := kadm.NewClient(e2eClient(t, c)).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Topics[l.Topic]; ok {
		t.Errorf("topic %s left after its load", l.Topic)
	}
}
