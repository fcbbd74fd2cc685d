package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/chaos"
)

// raftqStatus is the part of a raftq node's /v1/status document the
// harness reads (jepsen may not import broker; the fields are its JSON).
type raftqStatus struct {
	NodeID   uint64 `json:"node_id"`
	Metadata struct {
		Role   string `json:"role"`
		Term   uint64 `json:"term"`
		Leader uint64 `json:"leader"`
	} `json:"metadata"`
	Brokers []struct {
		ID    uint64 `json:"id"`
		Alive bool   `json:"alive"`
	} `json:"brokers"`
	Partitions []struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		Role      string   `json:"role"`
		Term      uint64   `json:"term"`
		Leader    uint64   `json:"leader"`
		Replicas  []uint64 `json:"replicas"`
	} `json:"partitions"`
}

// statusTimeout bounds one /v1/status request; a paused node never
// answers, so callers skip paused nodes.
const statusTimeout = 2 * time.Second

func fetchStatus(ctx context.Context, c *chaos.Cluster, id int) (raftqStatus, error) {
	var s raftqStatus
	n, err := c.Node(id)
	if err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.AdminURL(n, "/v1/status"), nil)
	if err != nil {
		return s, err
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return s, fmt.Errorf("status of node %d: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("status of node %d: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("status of node %d: %w", id, err)
	}
	return s, nil
}

// errNoLeader is returned when no live node leads the partition asked for.
var errNoLeader = errors.New("jepsen: no node leads the partition")

// partitionLeader returns the node that leads topic/p in the highest
// term any running, unpaused node reports.
func partitionLeader(ctx context.Context, c *chaos.Cluster, topic string, p int32) (int, error) {
	if id := partitionLeaders(ctx, c, topic)[p]; id != 0 {
		return id, nil
	}
	return 0, fmt.Errorf("%w: %s/%d", errNoLeader, topic, p)
}

// leaderFunc is the cluster's chaos.LeaderFunc: each call names the
// leader of the next partition of topic in turn, so kill-leader and
// isolate-leader faults visit every partition's leader.
func leaderFunc(topic string, partitions int32) chaos.LeaderFunc {
	var calls atomic.Int64
	return func(ctx context.Context, c *chaos.Cluster) (int, error) {
		p := int32(calls.Add(1)-1) % partitions
		return partitionLeader(ctx, c, topic, p)
	}
}

// rolesFunc is the cluster's chaos.RolesFunc: the roles of a partition
// of topic, from the /v1/status of every running, unpaused node.
func rolesFunc(topic string, partitions int32) chaos.RolesFunc {
	return func(ctx context.Context, c *chaos.Cluster, spec string) (chaos.RoleMap, error) {
		var sts []raftqStatus
		for _, id := range c.NodeIDs() {
			if !c.Running(id) || c.Paused(id) {
				continue
			}
			if s, err := fetchStatus(ctx, c, id); err == nil {
				sts = append(sts, s)
			}
		}
		return rolesFrom(sts, c.NodeIDs(), topic, partitions, spec)
	}
}

// rolesFrom works out a script's roles from the nodes' statuses: the
// metadata leader and a partition's leader are those the highest term
// reports; the partition is spec's number, or the lowest one whose
// replicas do not include the metadata leader.
func rolesFrom(sts []raftqStatus, nodes []int, topic string, partitions int32, spec string) (chaos.RoleMap, error) {
	meta, metaTerm := 0, uint64(0)
	type part struct {
		leader   int
		term     uint64
		replicas []int
	}
	parts := map[int32]*part{}
	for _, s := range sts {
		if m := s.Metadata; m.Leader != 0 && m.Term >= metaTerm {
			meta, metaTerm = int(m.Leader), m.Term
		}
		for _, ps := range s.Partitions {
			if ps.Topic != topic {
				continue
			}
			p := parts[ps.Partition]
			if p == nil {
				p = &part{}
				parts[ps.Partition] = p
			}
			if len(p.replicas) == 0 {
				for _, r := range ps.Replicas {
					p.replicas = append(p.replicas, int(r))
				}
				slices.Sort(p.replicas)
			}
			if ps.Role == "leader" && ps.Term >= p.term {
				p.leader, p.term = int(s.NodeID), ps.Term
			}
		}
	}
	if meta == 0 {
		return chaos.RoleMap{}, errors.New("jepsen: no node knows the metadata leader")
	}
	pick := int32(-1)
	if spec == chaos.PartitionAwayFromMetadataLeader {
		for p := range partitions {
			if q := parts[p]; q != nil && len(q.replicas) > 0 && !slices.Contains(q.replicas, meta) {
				pick = p
				break
			}
		}
		if pick < 0 {
			return chaos.RoleMap{}, fmt.Errorf("jepsen: every partition of %s has a replica on the metadata leader %d", topic, meta)
		}
	} else {
		n, err := strconv.Atoi(spec)
		if err != nil || n < 0 || int32(n) >= partitions {
			return chaos.RoleMap{}, fmt.Errorf("jepsen: partition %q of %d", spec, partitions)
		}
		pick = int32(n)
	}
	p := parts[pick]
	if p == nil || p.leader == 0 || len(p.replicas) == 0 {
		return chaos.RoleMap{}, fmt.Errorf("%w: %s/%d", errNoLeader, topic, pick)
	}
	r := chaos.RoleMap{Partition: fmt.Sprintf("%s/%d", topic, pick), Nodes: map[string][]int{
		chaos.RoleLeader:         {p.leader},
		chaos.RoleReplicas:       p.replicas,
		chaos.RoleMetadataLeader: {meta},
	}}
	for _, id := range p.replicas {
		if id != p.leader {
			r.Nodes[chaos.RoleFollowers] = append(r.Nodes[chaos.RoleFollowers], id)
		}
	}
	for _, id := range nodes {
		if !slices.Contains(p.replicas, id) {
			r.Nodes[chaos.RoleOthers] = append(r.Nodes[chaos.RoleOthers], id)
		}
	}
	return r, nil
}

// healthy reports nil when every node answers, every node sees every
// broker alive, and (when topic is set) every partition of topic has a
// leader; otherwise an error saying what is missing.
func healthy(ctx context.Context, c *chaos.Cluster, topic string, partitions int32) error {
	led := map[int32]bool{}
	for _, id := range c.NodeIDs() {
		s, err := fetchStatus(ctx, c, id)
		if err != nil {
			return err
		}
		alive := 0
		for _, b := range s.Brokers {
			if b.Alive {
				alive++
			}
		}
		if alive < len(c.NodeIDs()) {
			return fmt.Errorf("node %d sees %d of %d brokers alive", id, alive, len(c.NodeIDs()))
		}
		for _, ps := range s.Partitions {
			if ps.Topic == topic && ps.Role == "leader" {
				led[ps.Partition] = true
			}
		}
	}
	if topic == "" {
		return nil
	}
	for p := range partitions {
		if !led[p] {
			return fmt.Errorf("%w: %s/%d", errNoLeader, topic, p)
		}
	}
	return nil
}

// awaitHealthy polls healthy until it holds or timeout passes.
func awaitHealthy(ctx context.Context, c *chaos.Cluster, topic string, partitions int32, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		err := healthy(ctx, c, topic, partitions)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || last == nil {
			last = err // the check cut short by the deadline says less
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy after %s: %w", timeout, last)
		case <-tick.C:
		}
	}
}
