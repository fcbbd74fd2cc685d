package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/raftq/raftq/broker"
)

// nodeView is one broker as the console shows it.
type nodeView struct {
	ID                   uint64
	KafkaAddr, AdminAddr string
	Alive                bool // the metadata's liveness
	Reached              bool // its /v1/status answered this page
	Err                  string
	Self                 bool
	Version              string
	Status               broker.Status
	isr                  map[tp][]uint64 // from its status, where it reports one
}

// tp names a partition.
type tp struct {
	Topic     string
	Partition int32
}

// replicaView is one replica of a partition, as its node reports it.
type replicaView struct {
	Node  uint64
	Known bool // its node answered and reports the replica
	Role  string
	Term  uint64
	HW    int64
	Lag   int64 // the leader's high watermark minus this one's
}

// partView is one partition, merged from every node's report.
type partView struct {
	tp
	Leader   uint64 // 0: none known
	Epoch    uint64 // the leader's raft term, which is the leader epoch
	Replicas []replicaView
	ISR      []uint64
	HasISR   bool
	HW       int64
	LogStart int64
	Size     int64
	Rates    rates
}

// topicView is one topic and its partitions.
type topicView struct {
	Name       string
	Internal   bool
	Partitions []partView
	HW, Size   int64
	Leaderless int
	Rates      rates
}

// clusterView is what the console knows of the cluster on one page.
type clusterView struct {
	ClusterID  string
	Self       uint64
	Nodes      []nodeView
	MetaLeader uint64
	MetaTerm   uint64
	Topics     []topicView
	Offline    []offlineView
	Err        string // this node's own status did not answer
}

type offlineView struct {
	Node uint64
	broker.OfflineReplica
}

// isrDoc reads an ISR from a status document that has one (ISR-mode
// partitions), whatever broker.Status holds today.
type isrDoc struct {
	Partitions []struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		ISR       []uint64 `json:"isr"`
	} `json:"partitions"`
}

// fetchStatus reads one node's /v1/status.
func (c *Console) fetchStatus(ctx context.Context, admin string) (broker.Status, map[tp][]uint64, error) {
	var st broker.Status
	b, err := c.get(ctx, admin, "/v1/status")
	if err != nil {
		return st, nil, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, nil, fmt.Errorf("status of %s: %w", admin, err)
	}
	var doc isrDoc
	_ = json.Unmarshal(b, &doc) // the same document: it parsed above
	isr := map[tp][]uint64{}
	for _, p := range doc.Partitions {
		if p.ISR != nil {
			isr[tp{p.Topic, p.Partition}] = p.ISR
		}
	}
	return st, isr, nil
}

func (c *Console) get(ctx context.Context, admin, path string) ([]byte, error) {
	scheme := "http://"
	if c.cfg.AdminTLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s", admin, path, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// gather reads this node's status, then every other broker's status and
// version, at once.
func (c *Console) gather(ctx context.Context) clusterView {
	_, admin := c.cfg.Addrs()
	self, selfISR, err := c.fetchStatus(ctx, admin)
	if err != nil {
		return clusterView{Err: err.Error()}
	}
	cv := clusterView{ClusterID: self.ClusterID, Self: self.NodeID, MetaLeader: self.Metadata.Leader, MetaTerm: self.Metadata.Term}
	cv.Nodes = make([]nodeView, len(self.Brokers))
	var wg sync.WaitGroup
	for i, b := range self.Brokers {
		n := &cv.Nodes[i]
		n.ID, n.KafkaAddr, n.AdminAddr, n.Alive = b.ID, b.KafkaAddr, b.AdminAddr, b.Alive
		if b.ID == self.NodeID {
			n.Self, n.Reached, n.Status, n.isr, n.Version = true, true, self, selfISR, c.cfg.Version
			continue
		}
		if b.AdminAddr == "" {
			n.Err = "no admin address registered"
			continue
		}
		wg.Go(func() {
			st, isr, err := c.fetchStatus(ctx, n.AdminAddr)
			if err != nil {
				n.Err = err.Error()
				return
			}
			n.Reached, n.Status, n.isr = true, st, isr
			if v, err := c.get(ctx, n.AdminAddr, "/console/version"); err == nil {
				n.Version = strings.TrimSpace(string(v))
			}
		})
	}
	if !slices.ContainsFunc(self.Brokers, func(b broker.BrokerStatus) bool { return b.ID == self.NodeID }) {
		cv.Nodes = append(cv.Nodes, nodeView{ID: self.NodeID, KafkaAddr: self.KafkaAddr, AdminAddr: admin, Self: true, Reached: true, Status: self, isr: selfISR, Version: c.cfg.Version})
	}
	wg.Wait()
	for _, n := range cv.Nodes {
		for _, o := range n.Status.Offline {
			cv.Offline = append(cv.Offline, offlineView{n.ID, o})
		}
	}
	cv.Topics = mergeTopics(cv.Nodes)
	c.addRates(&cv)
	return cv
}

// mergeTopics builds the topics from every reached node's replicas: the
// leader is the replica that says it leads in the highest term, and the
// partition's figures are the leader's (the highest high watermark known
// where no leader answered).
func mergeTopics(nodes []nodeView) []topicView {
	type seen struct {
		node uint64
		st   broker.PartitionStatus
	}
	byPart := map[tp][]seen{}
	isr := map[tp][]uint64{}
	for _, n := range nodes {
		if !n.Reached {
			continue
		}
		for _, p := range n.Status.Partitions {
			k := tp{p.Topic, p.Partition}
			byPart[k] = append(byPart[k], seen{n.ID, p})
		}
		for k, v := range n.isr {
			isr[k] = v
		}
	}
	byTopic := map[string]*topicView{}
	for k, reps := range byPart {
		pv := partView{tp: k}
		var lead *broker.PartitionStatus
		for i := range reps {
			s := &reps[i].st
			if s.Role == "leader" && (lead == nil || s.Term > lead.Term) {
				lead, pv.Leader = s, reps[i].node
			}
			if len(s.Replicas) > 0 {
				pv.Replicas = replicasOf(s.Replicas)
			}
		}
		for _, r := range reps {
			pv.HW, pv.LogStart, pv.Size = max(pv.HW, r.st.HighWatermark), r.st.LogStart, max(pv.Size, r.st.SizeBytes)
		}
		if lead != nil {
			pv.Epoch, pv.HW, pv.LogStart, pv.Size = lead.Term, lead.HighWatermark, lead.LogStart, lead.SizeBytes
		}
		for i := range pv.Replicas {
			rv := &pv.Replicas[i]
			for _, r := range reps {
				if r.node == rv.Node {
					rv.Known, rv.Role, rv.Term, rv.HW = true, r.st.Role, r.st.Term, r.st.HighWatermark
					rv.Lag = max(pv.HW-r.st.HighWatermark, 0)
				}
			}
		}
		pv.ISR, pv.HasISR = isr[k]
		t := byTopic[k.Topic]
		if t == nil {
			t = &topicView{Name: k.Topic, Internal: strings.HasPrefix(k.Topic, "__")}
			byTopic[k.Topic] = t
		}
		t.Partitions = append(t.Partitions, pv)
		t.HW += pv.HW
		t.Size += pv.Size
		if pv.Leader == 0 {
			t.Leaderless++
		}
	}
	var out []topicView
	for _, t := range byTopic {
		slices.SortFunc(t.Partitions, func(a, b partView) int { return cmp.Compare(a.Partition, b.Partition) })
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b topicView) int {
		if a.Internal != b.Internal { // internal topics last
			if a.Internal {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func replicasOf(ids []uint64) []replicaView {
	out := make([]replicaView, len(ids))
	for i, id := range ids {
		out[i] = replicaView{Node: id}
	}
	return out
}

// topic returns the named topic of cv.
func (cv clusterView) topic(name string) (topicView, bool) {
	for _, t := range cv.Topics {
		if t.Name == name {
			return t, true
		}
	}
	return topicView{}, false
}
