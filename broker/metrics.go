package broker

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/transport/kafka"
)

// metrics holds the node's Prometheus registry. Request counts and
// latencies come from the Kafka server's Observer hook; per-partition raft
// and log figures are read at scrape time by partitionCollector.
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	conns       prometheus.Gauge
	produced    *prometheus.CounterVec
	fetchBytes  prometheus.Counter
	walSync     prometheus.Histogram
	produceRecs prometheus.Counter
	replicate   *prometheus.HistogramVec
	// ISR mode: ISR changes (reconcile) and follower fetches (isr.Hooks).
	isrChanges    *prometheus.CounterVec
	followerFetch *prometheus.HistogramVec
	saslAuths     *prometheus.CounterVec // SASL listeners (listeners.go)
	// adminTLSRefused counts TLS handshakes the admin listener refused
	// (node_tls.go); peer transport figures come from peerCollector.
	adminTLSRefused prometheus.Counter
	denied          *prometheus.CounterVec // authorization refusals (authorize.go)
	tlsFailures     *prometheus.CounterVec // TLS listeners (listeners_tls.go)
	dash            *dashboard             // metrics_dashboard.go

	cleanerRuns      prometheus.Counter // cleaner.go
	cleanerReclaimed prometheus.Counter
	cleanerErrors    prometheus.Counter

	// lastProduce is when the node last answered a produce request (unix
	// nanoseconds), for the drain's wait for clients to move (drain.go).
	lastProduce atomic.Int64
}

var _ kafka.Observer = (*metrics)(nil)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_kafka_requests_total", Help: "Kafka requests by API and outcome: response, no_response (acks=0), rejected (unsupported version) or failed (connection closed).",
	}, []string{"api", "outcome"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "raftq_kafka_request_seconds", Help: "Kafka request latency from frame read to response written.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"api"})
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "raftq_kafka_connections", Help: "Open Kafka connections."})
	m.produced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_produce_partitions_total", Help: "Partitions in produce requests, by error code (0 is success).",
	}, []string{"error"})
	m.produceRecs = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftq_produce_batches_total", Help: "Record batches proposed."})
	m.fetchBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftq_fetch_bytes_total", Help: "Record bytes returned by Fetch."})
	m.walSync = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "raftq_wal_fsync_seconds", Help: "Latency of raft WAL saves that fsynced.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
	})
	m.replicate = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "raftq_produce_replicate_seconds",
		Help:    "Raft's share of a produce: from a batch's proposal on the leader until the answer could go, by what it waited for: appended (durable in the leader's WAL; acks=1 with the offset known beforehand) or applied (committed by a quorum and applied; acks=all, and acks=1 otherwise). Batches answered without error only.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"until"})
	m.isrChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_isr_changes_total", Help: "ISR changes group 0 committed (the leader's AlterPartition, or fencing a dead broker) within a leader epoch of an ISR partition this node leads, by direction: expand or shrink (Kafka's IsrExpandsPerSec and IsrShrinksPerSec).",
	}, []string{"direction"})
	m.followerFetch = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "raftq_isr_follower_fetch_seconds", Help: "Round trips of this node's ISR follower fetches to their leaders (long polls included), by outcome: ok or failed.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"outcome"})
	for _, d := range []string{"expand", "shrink"} {
		m.isrChanges.WithLabelValues(d)
	}
	m.saslAuths = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_sasl_authentications_total", Help: "SASL authentications on this node's SASL listeners, by mechanism and outcome: ok or failed.",
	}, []string{"mechanism", "outcome"})
	m.adminTLSRefused = newAdminTLSRefused() // metrics_peer.go
	m.denied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_authorization_denied_total", Help: "Requests or request entries the authorizer refused, by API and resource type.",
	}, []string{"api", "resource_type"})
	m.tlsFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raftq_tls_handshake_failures_total", Help: "Connections to this node's TLS Kafka listeners closed because the handshake failed or timed out, or the client certificate mapped to no principal, by listener.",
	}, []string{"listener"})
	m.reg.MustRegister(m.requests, m.latency, m.conns, m.produced, m.produceRecs, m.fetchBytes, m.walSync, m.replicate,
		m.isrChanges, m.followerFetch, m.saslAuths, m.adminTLSRefused, m.denied, m.tlsFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.dash = newDashboard(m.reg)
	return m
}

// saslAuth counts one SASL authentication's end.
func (m *metrics) saslAuth(mechanism string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.saslAuths.WithLabelValues(mechanism, outcome).Inc()
}

// registerOffline exports how many replicas placed on the node it cannot
// open, read at scrape time (Kafka's OfflineReplicaCount).
func (m *metrics) registerOffline(count func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "raftq_offline_replicas", Help: "Partition replicas placed on this node that it cannot open; see offline_replicas in /v1/status.",
	}, func() float64 { return float64(count()) }))
}

// underReplicatedHelp is the help text of raftq_under_replicated_partitions,
// which both replication modes export, each with its own mode label: the
// registry accepts one name only with one help text.
const underReplicatedHelp = "Partitions this node leads with a replica out of sync, by replication mode: raft, a voter whose log has not held everything the leader's did for longer than --replica-lag-time-max, or a replica not alive; isr, an ISR smaller than the replica set."

// registerUnderReplicatedRaft exports the raft side of
// raftq_under_replicated_partitions (mode="raft"), read at scrape time
// (Node.underReplicatedRaft).
func (m *metrics) registerUnderReplicatedRaft(count func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "raftq_under_replicated_partitions", Help: underReplicatedHelp,
		ConstLabels: prometheus.Labels{"mode": "raft"},
	}, func() float64 { return float64(count()) }))
}

// registerWAL exports the raft host's fsync counters, read at scrape time:
// their ratio is how many groups' saves share an fsync (1 with a WAL per
// group; more with the shared WAL when several groups have work).
func (m *metrics) registerWAL(host func() raftgroup.Metrics) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "raftq_raft_durable_saves_total", Help: "Raft Readys whose log or vote had to be made durable.",
		}, func() float64 { return float64(host().Syncs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "raftq_wal_fsyncs_total", Help: "WAL fsyncs made for them (one per save with a WAL per group, one per batch with the shared WAL).",
		}, func() float64 { return float64(host().WALFsyncs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "raftq_raft_snapshots_total", Help: "Snapshots the node's raft groups took (each an fsync of the partition's log), by their own thresholds or asked by the shared WAL.",
		}, func() float64 { return float64(host().SnapshotsTaken) }),
	)
}

// isrChanged counts a committed ISR change of a partition this node leads.
func (m *metrics) isrChanged(_ uint64, expand bool) {
	d := "shrink"
	if expand {
		d = "expand"
	}
	m.isrChanges.WithLabelValues(d).Inc()
}

// followerFetched times a follower fetch (isr.Hooks.FollowerFetch).
func (m *metrics) followerFetched(d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "failed"
	}
	m.followerFetch.WithLabelValues(outcome).Observe(d.Seconds())
}

func (m *metrics) ConnOpened(*kafka.Conn) { m.conns.Inc() }
func (m *metrics) ConnClosed(c *kafka.Conn, reason error) {
	m.conns.Dec()
	if errors.Is(reason, kafka.ErrTLSHandshake) {
		m.tlsFailures.WithLabelValues(c.Listener()).Inc()
	}
}

func (m *metrics) RequestDone(_ *kafka.Conn, key, _ int16, outcome kafka.Outcome, latency time.Duration) {
	api := kmsg.NameForKey(key)
	m.requests.WithLabelValues(api, outcome.String()).Inc()
	m.latency.WithLabelValues(api).Observe(latency.Seconds())
}

func (m *metrics) countProduce(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) {
	m.lastProduce.Store(time.Now().UnixNano())
	m.dash.produced(r, resp)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			m.produced.WithLabelValues(strconv.Itoa(int(p.ErrorCode))).Inc()
		}
	}
}

func (m *metrics) countFetch(resp *kmsg.FetchResponse) {
	m.dash.fetched(resp)
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	m.fetchBytes.Add(float64(n))
}

// partitionCollector reports each local replica's replication and log
// state: raft's term and indexes for raft partitions, the ISR's size and
// under-replication for ISR partitions, the log's offsets for both.
type partitionCollector struct{ n *Node }

var (
	descTerm    = prometheus.NewDesc("raftq_raft_term", "Raft term of the partition's group on this node.", []string{"topic", "partition"}, nil)
	descCommit  = prometheus.NewDesc("raftq_raft_commit_index", "Raft commit index.", []string{"topic", "partition"}, nil)
	descApplied = prometheus.NewDesc("raftq_raft_applied_index", "Raft applied index.", []string{"topic", "partition"}, nil)
	descLeader  = prometheus.NewDesc("raftq_raft_is_leader", "1 if this node leads the partition (either mode).", []string{"topic", "partition"}, nil)
	descHW      = prometheus.NewDesc("raftq_partition_high_watermark", "High watermark (applied log end).", []string{"topic", "partition"}, nil)
	descStart   = prometheus.NewDesc("raftq_partition_log_start_offset", "Log start offset.", []string{"topic", "partition"}, nil)
	descSize    = prometheus.NewDesc("raftq_partition_size_bytes", "Bytes of segments on disk.", []string{"topic", "partition"}, nil)
	descEpoch   = prometheus.NewDesc("raftq_isr_leader_epoch", "Leader epoch of an ISR partition as this replica knows it.", []string{"topic", "partition"}, nil)
	descISRSize = prometheus.NewDesc("raftq_isr_in_sync_replicas", "Members of an ISR partition's ISR as this replica knows it.", []string{"topic", "partition"}, nil)
	// descUnder is the ISR side of raftq_under_replicated_partitions
	// (registerUnderReplicatedRaft has the raft side).
	descUnder = prometheus.NewDesc("raftq_under_replicated_partitions", underReplicatedHelp, nil, prometheus.Labels{"mode": "isr"})
)

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTerm, descCommit, descApplied, descLeader, descHW, descStart, descSize, descEpoch, descISRSize, descUnder} {
		ch <- d
	}
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.meta.View()
	under := 0
	for _, r := range c.n.replicaList() {
		s := r.lead.describe()
		labels := []string{r.topic, strconv.Itoa(int(r.index))}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		isLeader := r.lead.Leadership().IsLeader
		if s.Mode == coordinator.ModeISR {
			gauge(descEpoch, float64(s.LeaderEpoch))
			gauge(descISRSize, float64(len(s.ISR)))
			if ref, ok := st.PartitionByGroup(r.gid); ok && isLeader && len(s.ISR) < len(ref.Partition.Replicas) {
				under++
			}
		} else {
			gauge(descTerm, float64(s.Term))
			gauge(descCommit, float64(s.Commit))
			gauge(descApplied, float64(s.Applied))
		}
		gauge(descLeader, b2f(isLeader))
		if r.data != nil {
			l := r.data.repl.Log()
			gauge(descHW, float64(l.HighWatermark()))
			gauge(descStart, float64(l.StartOffset()))
		} else {
			gauge(descHW, 0)
			gauge(descStart, 0)
		}
		gauge(descSize, float64(r.size()))
	}
	ch <- prometheus.MustNewConstMetric(descUnder, prometheus.GaugeValue, float64(under))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
