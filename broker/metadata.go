package broker

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveMetadata answers from this node's copy of the metadata: brokers,
// and per partition its replicas and leader. The leader and its epoch (the
// raft term) come from the local raft group where this node hosts a
// replica, and from the leadership hints in the metadata elsewhere.
// Unknown topics are created when the client allows it and the broker is
// configured to.
func (n *Node) serveMetadata(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.MetadataRequest)
	g := n.metadataGate(c, r) // metadata_authz.go
	if n.wantsAutoCreate(r) {
		f := kafka.NewFuture()
		go func() {
			n.autoCreate(g.creatable(missingTopics(n.meta.View(), r)))
			f.Complete(n.fillMetadataOps(c, r, g.apply(r, n.metadataResponse(r, c.Listener()))), nil)
		}()
		return f
	}
	return kafka.Ready(n.fillMetadataOps(c, r, g.apply(r, n.metadataResponse(r, c.Listener())))) // authorize_ops.go
}

func (n *Node) metadataResponse(r *kmsg.MetadataRequest, listener string) *kmsg.MetadataResponse {
	st := n.meta.View()
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = n.brokerList(st, listener)
	resp.ClusterID = &n.cfg.ClusterID
	resp.ControllerID = n.controllerID()
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		for _, name := range st.TopicNames() {
			resp.Topics = append(resp.Topics, n.topicMetadata(st, st.Topics[name], r.Version))
		}
		return resp
	}
	for _, rt := range r.Topics {
		t := lookupTopic(st, rt.Topic, rt.TopicID)
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, n.topicMetadata(st, t, r.Version))
	}
	return resp
}

// lookupTopic finds a topic by name, or by id when no name is given.
func lookupTopic(st *coordinator.State, name *string, id [16]byte) *coordinator.Topic {
	if name != nil && *name != "" {
		return st.Topics[*name]
	}
	if t, ok := st.TopicByID(id); ok && id != ([16]byte{}) {
		return t
	}
	return nil
}

// brokerList is the brokers a client may connect to, as Kafka lists only
// its live brokers: those the metadata marks alive, this node (it is
// answering), and the metadata leader (which served as controller). A
// broker that died is left out until it is back, so clients do not dial
// it; its replicas still show in partitions, as offline.
func (n *Node) brokerList(st *coordinator.State, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, b := range n.brokers(st, listener) {
		if !b.fenced {
			out = append(out, b.MetadataResponseBroker)
		}
	}
	return out
}

// listedBroker is a registered broker and whether a client should leave
// it alone (Kafka's "fenced": registered but not live).
type listedBroker struct {
	kmsg.MetadataResponseBroker
	fenced bool
}

// brokers returns every registered broker in id order.
func (n *Node) brokers(st *coordinator.State, listener string) []listedBroker {
	controller := n.controllerID()
	var out []listedBroker
	for _, id := range st.BrokerIDs() {
		b := st.Brokers[id]
		host, port := splitHostPort(b.AddrFor(listener))
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = int32(id), host, port
		if b.Rack != "" {
			mb.Rack = &b.Rack
		}
		live := b.Alive || id == n.cfg.NodeID || int32(id) == controller
		out = append(out, listedBroker{mb, !live})
	}
	return out
}

func splitHostPort(addr string) (string, int32) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(portStr)
	return host, int32(port)
}

// controllerID is the metadata group's leader, which serves admin
// requests best (any node forwards them).
func (n *Node) controllerID() int32 {
	if l := n.ctl.Leader(); l != 0 {
		return int32(l)
	}
	return -1
}

func (n *Node) topicMetadata(st *coordinator.State, t *coordinator.Topic, version int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, t.Internal
	for i := range t.Partitions {
		if t.IsISR() {
			mt.Partitions = append(mt.Partitions, n.isrPartitionMetadata(st, &t.Partitions[i]))
			continue
		}
		mt.Partitions = append(mt.Partitions, n.partitionMetadata(st, &t.Partitions[i]))
	}
	return mt
}

func (n *Node) partitionMetadata(st *coordinator.State, p *coordinator.Partition) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = p.Index
	leader, term := n.leaderOf(p)
	// A replica here that failed to open takes no part in the group: a
	// hint naming this node as leader dates from before.
	selfOffline := p.HasReplica(n.cfg.NodeID) && n.isOffline(p.Group)
	mp.Leader, mp.LeaderEpoch = -1, int32(term)
	if b, ok := st.Brokers[leader]; ok && b.Alive && !(selfOffline && leader == n.cfg.NodeID) {
		mp.Leader = int32(leader)
	} else {
		mp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	lagging := n.laggingReplicas(p) // raft topics' ISR: insync_raft.go
	for _, id := range p.Replicas {
		mp.Replicas = append(mp.Replicas, int32(id))
		if b, ok := st.Brokers[id]; ok && b.Alive && !(selfOffline && id == n.cfg.NodeID) {
			if !lagging[id] {
				mp.ISR = append(mp.ISR, int32(id))
			}
		} else {
			mp.OfflineReplicas = append(mp.OfflineReplicas, int32(id))
		}
	}
	return mp
}

// leaderOf returns the best-known leader of p and its term: for a raft
// partition, the local raft group's view when this node hosts a replica
// and knows a leader at least as new as the metadata hint, else the hint;
// for an ISR partition always the metadata, where group 0 elects it (a
// local replica knows only what an earlier metadata told it).
func (n *Node) leaderOf(p *coordinator.Partition) (uint64, uint64) {
	if r := n.replicaByGroup(p.Group); r != nil && r.isr() == nil {
		if s := r.lead.Leadership(); s.Leader != 0 && uint64(s.Epoch) >= p.LeaderTerm {
			return s.Leader, uint64(s.Epoch)
		}
	}
	return p.Leader, p.LeaderTerm
}

func (n *Node) wantsAutoCreate(r *kmsg.MetadataRequest) bool {
	return n.cfg.AutoCreateTopics && allowsAutoCreate(r) && len(missingTopics(n.meta.View(), r)) > 0
}

// allowsAutoCreate is the request's AllowAutoTopicCreation, which v0-v3
// lack: Kafka reads their absence as true (kafka-python and other old
// clients rely on it), where a decoded request holds Go's false.
func allowsAutoCreate(r *kmsg.MetadataRequest) bool {
	return r.Version < 4 || r.AllowAutoTopicCreation
}

func missingTopics(st *coordinator.State, r *kmsg.MetadataRequest) []string {
	var out []string
	for _, rt := range r.Topics {
		if rt.Topic != nil && *rt.Topic != "" && st.Topics[*rt.Topic] == nil {
			out = append(out, *rt.Topic)
		}
	}
	return out
}

// autoCreate creates topics with the broker defaults, ignoring failures
// (the response then reports the topic unknown, and the client retries).
func (n *Node) autoCreate(names []string) {
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	for _, name := range names {
		rf := min(n.cfg.DefaultReplicationFactor, int16(max(1, liveBrokers(n.meta.View()))))
		c := &coordinator.CreateTopic{Name: name, ID: newTopicID(), Partitions: n.cfg.DefaultPartitions, ReplicationFactor: rf, RefuseCollision: true, AllowISR: true, ConfigVersion: coordinator.CurrentConfigVersion}
		if res, err := n.ctl.Propose(ctx, &coordinator.Command{CreateTopic: c}); err != nil || res.Err != nil {
			n.log.Info("auto-create topic", "topic", name, "err", err, "result", res.Err)
		}
	}
}

func liveBrokers(st *coordinator.State) int {
	k := 0
	for _, b := range st.Brokers {
		if b.Alive {
			k++
		}
	}
	return k
}

func newTopicID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // a version-4 UUID, as Kafka's are
	id[8] = id[8]&0x3f | 0x80
	return id
}
