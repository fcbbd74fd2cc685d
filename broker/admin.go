package broker

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// startAdmin serves /metrics, /debug/pprof/ and /v1/status.
func (n *Node) startAdmin() error {
	ln, err := net.Listen("tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", n.cfg.AdminAddr, err)
	}
	n.metrics.reg.MustRegister(partitionCollector{n}, dashboardCollector{n})
	n.metrics.registerWAL(n.host.Metrics)
	n.metrics.registerOffline(func() int { return len(n.offlineReplicas()) })
	n.metrics.registerUnderReplicatedRaft(n.underReplicatedRaft)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/v1/status", n.serveStatus)
	mux.Handle("/", n.adminRoot())
	n.adminLn = ln
	n.admin = &http.Server{Handler: mux}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.admin.Serve(ln)
	}()
	return nil
}

// Status is the JSON document of /v1/status.
type Status struct {
	NodeID     uint64            `json:"node_id"`
	ClusterID  string            `json:"cluster_id"`
	KafkaAddr  string            `json:"kafka_addr"`
	Fsync      string            `json:"fsync"`
	WAL        string            `json:"wal"` // "shared" (one WAL per node) or "group"
	Metadata   GroupStatus       `json:"metadata"`
	Brokers    []BrokerStatus    `json:"brokers"`
	Partitions []PartitionStatus `json:"partitions"`
	// Offline are the replicas placed on this node that it cannot open.
	Offline []OfflineReplica `json:"offline_replicas,omitempty"`
}

// GroupStatus is one raft group's state on this node.
type GroupStatus struct {
	Group   uint64   `json:"group"`
	Role    string   `json:"role"`
	Term    uint64   `json:"term"`
	Leader  uint64   `json:"leader"`
	Commit  uint64   `json:"commit"`
	Applied uint64   `json:"applied"`
	Voters  []uint64 `json:"voters"`
	Learner []uint64 `json:"learners,omitempty"`
}

// BrokerStatus is one registered broker, as the metadata has it.
type BrokerStatus struct {
	ID        uint64 `json:"id"`
	KafkaAddr string `json:"kafka_addr"`
	AdminAddr string `json:"admin_addr"`
	Alive     bool   `json:"alive"`
}

// PartitionStatus is one local replica.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	GroupStatus
	Replicas      []uint64 `json:"replicas"`
	HighWatermark int64    `json:"high_watermark"`
	LogStart      int64    `json:"log_start_offset"`
	SizeBytes     int64    `json:"size_bytes"`
}

// Status reports the node's view of the cluster and its replicas.
func (n *Node) Status() Status {
	st := n.meta.View()
	out := Status{NodeID: n.cfg.NodeID, ClusterID: n.cfg.ClusterID, KafkaAddr: n.advert, Fsync: n.cfg.Fsync.String(), WAL: walLayout(n.cfg.SharedWAL)}
	out.Metadata = groupStatus(n.ctl.Status())
	for _, id := range st.BrokerIDs() {
		b := st.Brokers[id]
		out.Brokers = append(out.Brokers, BrokerStatus{ID: id, KafkaAddr: b.KafkaAddr, AdminAddr: b.AdminAddr, Alive: b.Alive})
	}
	for _, r := range n.replicaList() {
		ps := PartitionStatus{Topic: r.topic, Partition: r.index, GroupStatus: r.lead.describe()}
		if r.data != nil {
			l := r.data.repl.Log()
			ps.HighWatermark, ps.LogStart, ps.SizeBytes = l.HighWatermark(), l.StartOffset(), l.Size()
		}
		if ref, ok := st.PartitionByGroup(r.gid); ok {
			ps.Replicas = ref.Partition.Replicas
		}
		out.Partitions = append(out.Partitions, ps)
	}
	out.Offline = n.offlineReplicas()
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out
}

func walLayout(shared bool) string {
	if shared {
		return "shared"
	}
	return "group"
}

func (n *Node) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(n.Status())
}

func (n *Node) serveIndex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	s := n.Status()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "raftq node %d of cluster %q (kafka %s, fsync %s)\n", s.NodeID, s.ClusterID, s.KafkaAddr, s.Fsync)
	fmt.Fprintf(w, "metadata group: %s term %d leader %d commit %d\n\n", s.Metadata.Role, s.Metadata.Term, s.Metadata.Leader, s.Metadata.Commit)
	for _, p := range s.Partitions {
		fmt.Fprintf(w, "%s-%d  %-9s term %-4d leader %-2d hw %-10d start %d\n", p.Topic, p.Partition, p.Role, p.Term, p.Leader, p.HighWatermark, p.LogStart)
	}
	for _, o := range s.Offline {
		fmt.Fprintf(w, "%s-%d  OFFLINE since %s: %s\n", o.Topic, o.Partition, o.Since.Format(time.RFC3339), o.Error)
	}
	fmt.Fprintln(w, "\n/metrics  /v1/status  /debug/pprof/")
}
