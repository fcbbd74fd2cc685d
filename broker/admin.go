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

	"github.com/raftq/raftq/coordinator"
)

// startAdmin serves /metrics, /debug/pprof/ and /v1/status, and the
// leadership requests: maintenance mode (maintenance.go) and a raft
// leader's transfer for ElectLeaders (electleaders_raft.go).
func (n *Node) startAdmin() error {
	ln, err := net.Listen("tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", n.cfg.AdminAddr, err)
	}
	n.metrics.reg.MustRegister(partitionCollector{n}, dashboardCollector{n}, peerCollector{n}) // metrics_peer.go
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
	n.routeBrokerAdmin(mux)
	mux.HandleFunc("PUT /v1/brokers/{id}/maintenance", n.serveMaintenance)                 // maintenance.go
	mux.HandleFunc("DELETE /v1/brokers/{id}/maintenance", n.serveMaintenance)              // maintenance.go
	mux.HandleFunc("POST /v1/raft/{group}/transfer_leadership", n.serveTransferLeadership) // electleaders_raft.go
	mux.Handle("/", n.adminRoot())
	n.adminLn = ln
	n.admin = n.adminServer(mux)  // node_tls.go
	served := n.adminListener(ln) // node_tls.go: TLS with AdminTLS
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.admin.Serve(served)
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

// GroupStatus is one replica's replication state on this node: a raft
// group's (the metadata group, a raft partition) or an ISR replica's. Role
// is "leader" on the leader in both modes, and Term its leader epoch.
type GroupStatus struct {
	Group uint64 `json:"group"`
	// Mode is the partition's replication.mode, "raft" or "isr"; empty
	// for the metadata group.
	Mode    string   `json:"mode,omitempty"`
	Role    string   `json:"role"`
	Term    uint64   `json:"term"`
	Leader  uint64   `json:"leader"`
	Commit  uint64   `json:"commit"`
	Applied uint64   `json:"applied"`
	Voters  []uint64 `json:"voters"`
	Learner []uint64 `json:"learners,omitempty"`
	// VotersOutgoing are the old voters while a joint configuration
	// change is under way (raft's joint consensus).
	VotersOutgoing []uint64 `json:"voters_outgoing,omitempty"`

	// The fields below are ISR mode's only: group 0's leader and
	// partition epochs, ISR and ELR as this replica last took them, its
	// log end, and on the leader each follower's lag.
	LeaderEpoch    int32         `json:"leader_epoch,omitempty"`
	PartitionEpoch int32         `json:"partition_epoch,omitempty"`
	ISR            []uint64      `json:"isr,omitempty"`
	ELR            []uint64      `json:"elr,omitempty"`
	Recovering     bool          `json:"recovering,omitempty"`
	EndOffset      int64         `json:"end_offset,omitempty"`
	Followers      []FollowerLag `json:"followers,omitempty"`
}

// FollowerLag is an ISR leader's view of one follower.
type FollowerLag struct {
	ID uint64 `json:"id"`
	// EndOffset is the follower's latest fetch offset (-1: none yet).
	EndOffset int64 `json:"end_offset"`
	// Lag is how many offsets it trails the leader's log end (-1: unknown).
	Lag int64 `json:"lag"`
	// SinceCaughtUpMs is how long ago it was last caught up (-1: never).
	SinceCaughtUpMs int64 `json:"since_caught_up_ms"`
	InISR           bool  `json:"in_isr"`
}

// BrokerStatus is one registered broker, as the metadata has it.
type BrokerStatus struct {
	ID        uint64 `json:"id"`
	KafkaAddr string `json:"kafka_addr"`
	AdminAddr string `json:"admin_addr"`
	Alive     bool   `json:"alive"`
	// ShuttingDown: the broker is in controlled shutdown (it drains
	// before it stops) until it registers again.
	ShuttingDown bool `json:"shutting_down,omitempty"`
	// Decommissioned: the broker is being emptied (or was).
	Decommissioned bool `json:"decommissioned,omitempty"`
	// Maintenance: the broker is in maintenance mode; it hands over
	// every leadership it holds and is handed none (maintenance.go).
	Maintenance bool `json:"maintenance,omitempty"`
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
		out.Brokers = append(out.Brokers, BrokerStatus{ID: id, KafkaAddr: b.KafkaAddr, AdminAddr: b.AdminAddr, Alive: b.Alive,
			ShuttingDown: b.ShuttingDown, Decommissioned: b.Decommissioned, Maintenance: b.InMaintenance})
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
		fmt.Fprintf(w, "%s-%d  %-4s %-9s term %-4d leader %-2d hw %-10d start %d", p.Topic, p.Partition, p.Mode, p.Role, p.Term, p.Leader, p.HighWatermark, p.LogStart)
		if p.Mode == coordinator.ModeISR {
			fmt.Fprintf(w, "  isr %v elr %v", p.ISR, p.ELR)
		}
		fmt.Fprintln(w)
	}
	for _, o := range s.Offline {
		fmt.Fprintf(w, "%s-%d  OFFLINE since %s: %s\n", o.Topic, o.Partition, o.Since.Format(time.RFC3339), o.Error)
	}
	fmt.Fprintln(w, "\n/metrics  /v1/status  /debug/pprof/")
}
