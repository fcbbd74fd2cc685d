package console

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/broker"
)

// fakeNode serves a /v1/status document as a raftq node's admin port does.
type fakeNode struct {
	srv    *httptest.Server
	status func() broker.Status
}

func newFakeNode(t *testing.T, status func() broker.Status) *fakeNode {
	t.Helper()
	n := &fakeNode{status: status}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/status", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(n.status()) })
	mux.HandleFunc("/console/version", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "raftq test-2\n") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE raftq_partition_records_out_total counter\nraftq_partition_records_out_total{partition=\"0\",topic=\"orders\"} 7\n")
	})
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *fakeNode) addr() string { return strings.TrimPrefix(n.srv.URL, "http://") }

// testCluster is two reachable fake nodes and a third that is down, over
// a kfake Kafka cluster holding topic orders (2 partitions).
type testCluster struct {
	con        *Console
	kafka      *kfake.Cluster
	n1, n2     *fakeNode
	downAdmin  string
	reportsDir string
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	tc := &testCluster{kafka: kf, reportsDir: t.TempDir()}
	down := httptest.NewServer(http.NotFoundHandler())
	tc.downAdmin = strings.TrimPrefix(down.URL, "http://")
	down.Close() // a node whose admin port refuses
	brokers := func() []broker.BrokerStatus {
		return []broker.BrokerStatus{
			{ID: 1, KafkaAddr: kf.ListenAddrs()[0], AdminAddr: tc.n1.addr(), Alive: true},
			{ID: 2, KafkaAddr: "127.0.0.1:2", AdminAddr: tc.n2.addr(), Alive: true},
			{ID: 3, KafkaAddr: "127.0.0.1:3", AdminAddr: tc.downAdmin, Alive: false},
		}
	}
	part := func(p int32, role string, term, leader uint64, hw int64) broker.PartitionStatus {
		return broker.PartitionStatus{Topic: "orders", Partition: p, GroupStatus: broker.GroupStatus{Role: role, Term: term, Leader: leader},
			Replicas: []uint64{1, 2, 3}, HighWatermark: hw, LogStart: 0, SizeBytes: 1000 * hw}
	}
	tc.n1 = newFakeNode(t, func() broker.Status {
		return broker.Status{NodeID: 1, ClusterID: "test", Metadata: broker.GroupStatus{Role: "leader", Term: 4, Leader: 1},
			Brokers: brokers(), Partitions: []broker.PartitionStatus{part(0, "leader", 3, 1, 10), part(1, "follower", 5, 2, 6)}}
	})
	tc.n2 = newFakeNode(t, func() broker.Status {
		return broker.Status{NodeID: 2, ClusterID: "test", Metadata: broker.GroupStatus{Role: "follower", Term: 4, Leader: 1},
			Brokers: brokers(), Partitions: []broker.PartitionStatus{part(0, "follower", 3, 1, 8), part(1, "leader", 5, 2, 7)}}
	})
	cfg := DefaultConfig()
	cfg.Addrs = func() (string, string) { return kf.ListenAddrs()[0], tc.n1.addr() }
	cfg.ReportsDir, cfg.Version = tc.reportsDir, "raftq test-1"
	cfg.SampleInterval, cfg.NodeTimeout = 20*time.Millisecond, time.Second
	con, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	tc.con = con
	return tc
}

// get serves path through the console and returns the status and body.
func (tc *testCluster) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	tc.con.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func mustGet(t *testing.T, tc *testCluster, path string) string {
	t.Helper()
	code, body := tc.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	return body
}

func wantIn(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// The overview shows every node with its liveness and version, the
// metadata leader and term, each partition's leader as the replica that
// leads in the highest term, a replica's lag behind it, and an
// unreachable node as unknown rather than with figures.
func TestConsole_Overview(t *testing.T) {
	tc := newTestCluster(t)
	body := mustGet(t, tc, "/")
	wantIn(t, "overview", body,
		`data-meta-leader="1"`, `data-meta-term="4"`,
		`<tr data-node="1" data-alive="true" data-reached="true">`,
		`<tr data-node="2" data-alive="true" data-reached="true">`,
		`<tr data-node="3" data-alive="false" data-reached="false">`,
		"raftq test-1", "raftq test-2",
		`<tr data-topic="orders" data-partitions="2">`,
		`data-partition="0" data-leader="1"`, `data-partition="1" data-leader="2"`,
		`<script src="/assets/console.js" defer></script>`, `<main id="live" data-live>`)
	if !regexp.MustCompile(`data-node="3"[^\n]*\n[^\n]*\n<td><span class="bad">down</span>`).MatchString(body) {
		t.Errorf("node 3 (not alive, unreachable) is not shown down:\n%s", body)
	}

	topic := mustGet(t, tc, "/topics/orders")
	// Partition 0: leader 1 at 10, node 2 at 8 (lag 2), node 3 unknown.
	wantIn(t, "topic page", topic,
		`<tr data-topic="orders" data-partition="0" data-leader="1" data-hw="10">`,
		`<tr data-topic="orders" data-partition="1" data-leader="2" data-hw="7">`,
		`title="follower, term 3, high watermark 8">2<small>−2</small>`,
		`title="its node did not answer">3<small>?</small>`)

	// The fragment is the live part alone, for console.js to swap in.
	frag := mustGet(t, tc, "/topics/orders?fragment=1")
	if strings.Contains(frag, "<html") || !strings.Contains(frag, `data-partition="0" data-leader="1"`) {
		t.Errorf("fragment is not the live part alone:\n%s", frag)
	}
	if code, _ := tc.get(t, "/topics/nope"); code != http.StatusNotFound {
		t.Errorf("GET /topics/nope: %d, want 404", code)
	}
	if code, _ := tc.get(t, "/nowhere"); code != http.StatusNotFound {
		t.Errorf("GET /nowhere: %d, want 404", code)
	}
}

// A partition page shows its last records, newest first, with key, value
// preview, headers and timestamp, read through the Kafka API; a group's
// page its members and lag per partition.
func TestConsole_PartitionAndGroup(t *testing.T) {
	tc := newTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.kafka.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 0, Key: []byte("k"), Value: []byte("order-" + string(rune('a'+i%26))),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("42")}}})
	}
	recs = append(recs, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte{0, 1, 2, 0xff}})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The fake nodes say the high watermark is 10: the page reads 0-9.
	body := mustGet(t, tc, "/topics/orders/0")
	wantIn(t, "partition page", body, "Last records (0 to 10, newest first)", `<tr data-offset="9">`, `<tr data-offset="0">`,
		`<code class="">order-j</code>`, `<b>trace</b>=<code class="">42</code>`, `<code class="">k</code>`)
	if strings.Index(body, `data-offset="9"`) > strings.Index(body, `data-offset="0"`) {
		t.Error("records are not newest first")
	}
	if strings.Contains(body, `data-offset="10"`) {
		t.Error("a record at the high watermark is shown")
	}

	gcl, err := kgo.NewClient(kgo.SeedBrokers(tc.kafka.ListenAddrs()...), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("biller"))
	if err != nil {
		t.Fatal(err)
	}
	defer gcl.Close()
	for got := 0; got < 5 && ctx.Err() == nil; {
		got += len(gcl.PollRecords(ctx, 5-got).Records())
	}
	commit := map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 5}}}
	var commitErr error
	gcl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	over := mustGet(t, tc, "/")
	// kfake's end of partition 0 is 31: lag 26 there, and 0 on partition 1.
	wantIn(t, "overview groups", over, `<tr data-group="billing">`, `<a href="/groups/billing">billing</a>`, `data-lag="26"`, "orders-0:26")
	group := mustGet(t, tc, "/groups/billing")
	wantIn(t, "group page", group, "<td>biller</td>", `<tr data-topic="orders" data-partition="0" data-lag="26">`, "Stable")
	if code, _ := tc.get(t, "/groups/nope"); code != http.StatusNotFound {
		t.Errorf("GET /groups/nope: %d, want 404", code)
	}
}

// Reports are listed newest first with their verdicts, linked, and served
// from the reports dir only.
func TestConsole_Reports(t *testing.T) {
	tc := newTestCluster(t)
	for i, r := range []struct{ name, verdict string }{{"20260101T000000Z", "fail"}, {"20260102T000000Z", "ok"}} {
		dir := filepath.Join(tc.reportsDir, r.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>report "+r.name+"</p>"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "results.json"), []byte(`{"verdict":"`+r.verdict+`"}`), 0o644)
		at := time.Now().Add(time.Duration(i-2) * time.Hour)
		_ = os.Chtimes(dir, at, at)
	}
	_ = os.MkdirAll(filepath.Join(tc.reportsDir, "not-a-report"), 0o755)
	for _, path := range []string{"/", "/reports/"} {
		body := mustGet(t, tc, path)
		wantIn(t, path, body, `<a href="/reports/20260102T000000Z/">20260102T000000Z</a>`, `verdict-fail">fail`, `verdict-ok">ok`)
		if strings.Index(body, "20260102T000000Z") > strings.Index(body, "20260101T000000Z") {
			t.Errorf("%s: reports not newest first", path)
		}
		if strings.Contains(body, "not-a-report") {
			t.Errorf("%s lists a directory that holds no report", path)
		}
	}
	wantIn(t, "report file", mustGet(t, tc, "/reports/20260101T000000Z/"), "<p>report 20260101T000000Z</p>")
	if code, body := tc.get(t, "/reports/../console_test.go"); code == http.StatusOK && strings.Contains(body, "package console") {
		t.Error("a path out of the reports dir was served")
	}
}

// Everything the console serves comes from the binary: no page or asset
// names another origin, and the assets are served.
func TestConsole_NoExternalResources(t *testing.T) {
	tc := newTestCluster(t)
	err := fs.WalkDir(embedded, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := embedded.ReadFile(path)
		// The only absolute URLs are the links to other nodes' admin
		// ports (http://{{.AdminAddr}}), which this does not match.
		for _, m := range regexp.MustCompile(`(https?:)?//[a-zA-Z0-9.-]+`).FindAllString(string(b), -1) {
			t.Errorf("%s names %s", path, m)
		}
		if strings.Contains(string(b), "@import") || strings.Contains(string(b), "url(http") {
			t.Errorf("%s loads from elsewhere", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"/assets/console.js", "/assets/console.css"} {
		if code, body := tc.get(t, a); code != http.StatusOK || len(body) < 100 {
			t.Errorf("GET %s: %d, %d bytes", a, code, len(body))
		}
	}
}

// The sampler turns this node's high watermarks and records served into
// rates, and the pages draw them.
func TestConsole_Rates(t *testing.T) {
	tc := newTestCluster(t)
	var hw atomic.Int64 // the page and the sampler ask at once
	tc.n1.status = func() broker.Status {
		hw := hw.Add(5)
		return broker.Status{NodeID: 1, ClusterID: "test", Brokers: []broker.BrokerStatus{{ID: 1, AdminAddr: tc.n1.addr(), Alive: true}},
			Partitions: []broker.PartitionStatus{{Topic: "orders", Partition: 0, GroupStatus: broker.GroupStatus{Role: "leader", Term: 1}, HighWatermark: hw}}}
	}
	mustGet(t, tc, "/") // starts the sampler
	deadline := time.Now().Add(10 * time.Second)
	for {
		tc.con.mu.Lock()
		n := len(tc.con.samples)
		tc.con.mu.Unlock()
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples after 10s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	body := mustGet(t, tc, "/topics/orders")
	if !strings.Contains(body, "<polyline") {
		t.Errorf("no sparkline drawn:\n%s", body)
	}
	if strings.Contains(body, "no samples on this node") {
		t.Error("partition 0 has samples but shows none")
	}
}

func TestRecordsOut(t *testing.T) {
	got := recordsOut([]byte("# HELP x\nraftq_partition_records_out_total{partition=\"3\",topic=\"a.b-c\"} 12\nraftq_partition_records_in_total{partition=\"3\",topic=\"a\"} 99\n"))
	if len(got) != 1 || got[tp{"a.b-c", 3}] != 12 {
		t.Errorf("recordsOut = %v, want a.b-c/3 = 12 only", got)
	}
}

func TestSeries(t *testing.T) {
	t0 := time.Now()
	k := tp{"t", 0}
	s := []sample{
		{at: t0, hw: map[tp]int64{k: 0}, out: map[tp]float64{k: 0}},
		{at: t0.Add(2 * time.Second), hw: map[tp]int64{k: 10}, out: map[tp]float64{k: 4}},
		{at: t0.Add(4 * time.Second), hw: map[tp]int64{k: 10}, out: map[tp]float64{k: 4}},
	}
	prod, fetch, known := series(s, k)
	if !known || len(prod) != 2 || prod[0] != 5 || prod[1] != 0 || fetch[0] != 2 {
		t.Errorf("series = %v %v %v, want [5 0] [2 0] true", prod, fetch, known)
	}
	if _, _, known := series(s, tp{"other", 0}); known {
		t.Error("a partition without samples is known")
	}
	if got := addSeries([]float64{1, 2, 3}, []float64{10}); got[2] != 13 || got[0] != 1 {
		t.Errorf("addSeries aligned at the start: %v", got)
	}
}

func TestPreviewOf(t *testing.T) {
	if p := previewOf([]byte("héllo")); p.Binary || p.Text != "héllo" {
		t.Errorf("text: %+v", p)
	}
	if p := previewOf([]byte{0, 0xff}); !p.Binary || p.Text != "00ff" {
		t.Errorf("binary: %+v", p)
	}
	if p := previewOf(nil); !p.Null {
		t.Errorf("nil: %+v", p)
	}
	long := strings.Repeat("é", previewBytes) // a rune cut in half at the bound is still text
	if p := previewOf([]byte(long)); p.Binary || !p.Cut || p.Len != len(long) {
		t.Errorf("long text: binary %v cut %v len %d", p.Binary, p.Cut, p.Len)
	}
}
