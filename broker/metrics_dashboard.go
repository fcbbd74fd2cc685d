package broker

import (
	"encoding/binary"
	"reflect"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// dashboard holds the figures Kafka and Redpanda Grafana dashboards chart
// that the rest of metrics.go does not: traffic per topic and partition,
// request errors by code, and (read at scrape time by dashboardCollector)
// consumer-group lag and the node's leader count. README's "Metrics for
// dashboards" maps the names onto Kafka's and Redpanda's.
type dashboard struct {
	errors *prometheus.CounterVec

	mu      sync.Mutex // a leaf: held only to update or copy traffic
	traffic map[trafficKey]*traffic
}

// trafficKey names a partition as the request did: by name, or by topic
// id from Produce v13 and Fetch v13 on, resolved at scrape time.
type trafficKey struct {
	topic     string
	id        [16]byte
	partition int32
}

type traffic struct{ bytesIn, recordsIn, bytesOut, recordsOut uint64 }

func newDashboard(reg *prometheus.Registry) *dashboard {
	d := &dashboard{traffic: map[trafficKey]*traffic{}}
	d.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_kafka_request_errors_total",
		Help: "Error codes in Kafka responses, by API and Kafka error name, once per partition, group or request that carries one (Kafka's RequestMetrics ErrorsPerSec, without NONE).",
	}, []string{"api", "error"})
	reg.MustRegister(d.errors)
	return d
}

// counted wraps fn so that the error codes of its responses are counted
// when the connection's writer takes them.
func (d *dashboard) counted(fn kafka.ServeFunc) kafka.ServeFunc {
	return func(c *kafka.Conn, req *kafka.Request) kafka.Pending {
		return countedPending{fn(c, req), d, req.Header.Key}
	}
}

type countedPending struct {
	kafka.Pending
	d   *dashboard
	key int16
}

func (p countedPending) Result() (kmsg.Response, error) {
	resp, err := p.Pending.Result()
	if resp != nil {
		api := kmsg.NameForKey(p.key)
		forEachErrorCode(resp, func(code int16) {
			p.d.errors.WithLabelValues(api, errorName(code)).Inc()
		})
	}
	return resp, err
}

func errorName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}

// forEachErrorCode calls fn for every non-zero ErrorCode field in resp,
// at any depth: by hand for Produce and Fetch, which every client sends
// all the time, and by a walk compiled once per response type for the
// rest. Record bytes are []byte and are never walked.
func forEachErrorCode(resp kmsg.Response, fn func(int16)) {
	code := func(c int16) {
		if c != 0 {
			fn(c)
		}
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		code(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	default:
		v := reflect.ValueOf(resp)
		walkOf(v.Type())(v, fn)
	}
}

// walk calls fn for the non-zero error codes in a value of one type.
type walk func(v reflect.Value, fn func(int16))

var walks sync.Map // reflect.Type -> walk

func walkOf(t reflect.Type) walk {
	if w, ok := walks.Load(t); ok {
		return w.(walk)
	}
	w := compileWalk(t)
	walks.Store(t, w)
	return w
}

func noWalk(reflect.Value, func(int16)) {}

// compileWalk builds t's walk; types without error codes get noWalk.
func compileWalk(t reflect.Type) walk {
	switch t.Kind() {
	case reflect.Pointer:
		elem := compileWalk(t.Elem())
		if isNoWalk(elem) {
			return noWalk
		}
		return func(v reflect.Value, fn func(int16)) {
			if !v.IsNil() {
				elem(v.Elem(), fn)
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return noWalk
		}
		elem := compileWalk(t.Elem())
		if isNoWalk(elem) {
			return noWalk
		}
		return func(v reflect.Value, fn func(int16)) {
			for i := range v.Len() {
				elem(v.Index(i), fn)
			}
		}
	case reflect.Struct:
		var codes []int
		type sub struct {
			i int
			w walk
		}
		var subs []sub
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				codes = append(codes, i)
				continue
			}
			if w := compileWalk(f.Type); !isNoWalk(w) {
				subs = append(subs, sub{i, w})
			}
		}
		if len(codes) == 0 && len(subs) == 0 {
			return noWalk
		}
		return func(v reflect.Value, fn func(int16)) {
			for _, i := range codes {
				if c := int16(v.Field(i).Int()); c != 0 {
					fn(c)
				}
			}
			for _, s := range subs {
				s.w(v.Field(s.i), fn)
			}
		}
	}
	return noWalk
}

func isNoWalk(w walk) bool {
	return reflect.ValueOf(w).Pointer() == reflect.ValueOf(walk(noWalk)).Pointer()
}

// produced counts the batches of every partition the response accepted.
func (d *dashboard) produced(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range r.Topics {
		rt := &r.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if i >= len(resp.Topics) || j >= len(resp.Topics[i].Partitions) || resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue
			}
			t := d.of(trafficKey{rt.Topic, rt.TopicID, rp.Partition})
			t.bytesIn += uint64(len(rp.Records))
			t.recordsIn += batchRecords(rp.Records)
		}
	}
}

// fetched counts what a Fetch response returns.
func (d *dashboard) fetched(resp *kmsg.FetchResponse) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if len(rp.RecordBatches) == 0 {
				continue
			}
			t := d.of(trafficKey{rt.Topic, rt.TopicID, rp.Partition})
			t.bytesOut += uint64(len(rp.RecordBatches))
			t.recordsOut += batchRecords(rp.RecordBatches)
		}
	}
}

func (d *dashboard) of(k trafficKey) *traffic {
	t := d.traffic[k]
	if t == nil {
		t = &traffic{}
		d.traffic[k] = t
	}
	return t
}

// batchRecords counts the records of the v2 batches in b by their
// headers (NumRecords at byte 57); a truncated tail, which Fetch may
// return, counts nothing.
func batchRecords(b []byte) uint64 {
	var n uint64
	for len(b) >= 61 {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 61 || size > len(b) {
			break
		}
		if b[16] == 2 { // magic
			n += uint64(max(int32(binary.BigEndian.Uint32(b[57:61])), 0))
		}
		b = b[size:]
	}
	return n
}

// dashboardCollector reports the dashboard's traffic, the leader count
// and the lag of the groups this node coordinates.
type dashboardCollector struct{ n *Node }

var (
	partLabels       = []string{"topic", "partition"}
	descBytesIn      = prometheus.NewDesc("raftq_partition_bytes_in_total", "Record-batch bytes of produce requests this node accepted as the partition's leader.", partLabels, nil)
	descRecordsIn    = prometheus.NewDesc("raftq_partition_records_in_total", "Records of produce requests this node accepted as the partition's leader.", partLabels, nil)
	descBytesOut     = prometheus.NewDesc("raftq_partition_bytes_out_total", "Record-batch bytes this node returned in Fetch responses.", partLabels, nil)
	descRecordsOut   = prometheus.NewDesc("raftq_partition_records_out_total", "Records this node returned in Fetch responses (whole batches, as Kafka counts them).", partLabels, nil)
	descLeaderCount  = prometheus.NewDesc("raftq_leader_partitions", "Partitions (and __consumer_offsets partitions) whose raft group this node leads (Kafka's LeaderCount).", nil, nil)
	descReplicaCount = prometheus.NewDesc("raftq_replica_partitions", "Partition replicas on this node (Kafka's PartitionCount).", nil, nil)
	descGroupLag     = prometheus.NewDesc("raftq_consumergroup_lag", "A group's lag on a partition: this node's high watermark of it minus the group's committed offset. Reported by the group's coordinator, for the partitions it hosts.", []string{"group", "topic", "partition"}, nil)
	descGroupOffset  = prometheus.NewDesc("raftq_consumergroup_committed_offset", "A group's committed offset on a partition, reported by the group's coordinator.", []string{"group", "topic", "partition"}, nil)
)

func (c dashboardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBytesIn, descRecordsIn, descBytesOut, descRecordsOut, descLeaderCount, descReplicaCount, descGroupLag, descGroupOffset} {
		ch <- d
	}
}

func (c dashboardCollector) Collect(ch chan<- prometheus.Metric) {
	c.traffic(ch)
	leaders, replicas := 0, 0
	for _, r := range c.n.replicaList() {
		replicas++
		if r.lead.Leadership().IsLeader {
			leaders++
		}
	}
	ch <- prometheus.MustNewConstMetric(descLeaderCount, prometheus.GaugeValue, float64(leaders))
	ch <- prometheus.MustNewConstMetric(descReplicaCount, prometheus.GaugeValue, float64(replicas))
	c.lag(ch)
}

func (c dashboardCollector) traffic(ch chan<- prometheus.Metric) {
	d := c.n.metrics.dash
	d.mu.Lock()
	byName := map[trafficKey]traffic{}
	for k, t := range d.traffic {
		byName[k] = *t
	}
	d.mu.Unlock()
	sum := map[trafficKey]traffic{}
	for k, t := range byName {
		name := topicName(c.n, k.topic, k.id)
		if name == "" {
			continue // a deleted topic's id
		}
		nk := trafficKey{topic: name, partition: k.partition}
		s := sum[nk]
		s.bytesIn, s.recordsIn, s.bytesOut, s.recordsOut = s.bytesIn+t.bytesIn, s.recordsIn+t.recordsIn, s.bytesOut+t.bytesOut, s.recordsOut+t.recordsOut
		sum[nk] = s
	}
	for k, t := range sum {
		labels := []string{k.topic, strconv.Itoa(int(k.partition))}
		for _, m := range []struct {
			d *prometheus.Desc
			v uint64
		}{{descBytesIn, t.bytesIn}, {descRecordsIn, t.recordsIn}, {descBytesOut, t.bytesOut}, {descRecordsOut, t.recordsOut}} {
			ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v), labels...)
		}
	}
}

func (c dashboardCollector) lag(ch chan<- prometheus.Metric) {
	for _, coord := range c.n.localCoordinators() {
		list, code := coord.List()
		if code != 0 {
			continue
		}
		for _, g := range list {
			offs, code := coord.FetchOffsets(g.Name, nil)
			if code != 0 {
				continue
			}
			for tp, o := range offs {
				labels := []string{g.Name, tp.Topic, strconv.Itoa(int(tp.Partition))}
				ch <- prometheus.MustNewConstMetric(descGroupOffset, prometheus.GaugeValue, float64(o.Offset), labels...)
				r, _ := c.n.dataFor(tp.Topic, tp.Partition)
				if r == nil || r.data == nil || o.Offset < 0 {
					continue
				}
				ch <- prometheus.MustNewConstMetric(descGroupLag, prometheus.GaugeValue, float64(max(r.data.repl.Log().HighWatermark()-o.Offset, 0)), labels...)
			}
		}
	}
}
