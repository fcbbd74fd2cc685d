package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// membersEnv is the cluster with the admin side the membership nemesis
// needs (chaos.MembershipEnv), for the test topic: Kafka's admin APIs
// through kadm, on a kgo client that dials into the namespace as the
// workload's clients do (kgo sends them to the controller), and the
// nodes' /v1/status for who leads.
type membersEnv struct {
	*chaos.Cluster
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
}

var _ chaos.MembershipEnv = (*membersEnv)(nil)

func newMembersEnv(c *chaos.Cluster, topic string) (*membersEnv, error) {
	var seeds []string
	for _, n := range c.Nodes() {
		seeds = append(seeds, n.KafkaAddr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.Dialer(c.DialContext), kgo.MetadataMinAge(metadataMinAge))
	if err != nil {
		return nil, fmt.Errorf("jepsen: admin client: %w", err)
	}
	return &membersEnv{Cluster: c, cl: cl, adm: kadm.NewClient(cl), topic: topic}, nil
}

func (e *membersEnv) Close() { e.cl.Close() }

// Assignment lists the test topic's partitions as group 0's leader
// sees it (a node that has just restarted answers from the states it
// replays, which can be minutes old): replicas from its Metadata answer,
// moves from its ListPartitionReassignments answer, and leaders from
// every running node's /v1/status.
func (e *membersEnv) Assignment(ctx context.Context) ([]chaos.PartitionReplicas, error) {
	sts := statuses(ctx, e.Cluster)
	ctrl := metadataLeader(sts)
	if ctrl == 0 {
		return nil, errors.New("jepsen: no running node leads the metadata group")
	}
	b := e.cl.Broker(ctrl)
	mreq := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.topic)
	mreq.Topics = append(mreq.Topics, rt)
	md, err := mreq.RequestWith(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("metadata from node %d: %w", ctrl, err)
	}
	t, err := topicOf(md, e.topic)
	if err != nil {
		return nil, err
	}
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	lreq.TimeoutMillis = int32(statusTimeout.Milliseconds())
	lt := kmsg.NewListPartitionReassignmentsRequestTopic()
	lt.Topic = e.topic
	for _, p := range t.Partitions {
		lt.Partitions = append(lt.Partitions, p.Partition)
	}
	lreq.Topics = append(lreq.Topics, lt)
	moves, err := lreq.RequestWith(ctx, b)
	if err == nil {
		err = kerr.ErrorForCode(moves.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("list partition reassignments from node %d: %w", ctrl, err)
	}
	moving := map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, mt := range moves.Topics {
		for _, p := range mt.Partitions {
			if mt.Topic == e.topic {
				moving[p.Partition] = p
			}
		}
	}
	leaders := leadersFrom(sts, e.topic)
	var out []chaos.PartitionReplicas
	for _, p := range t.Partitions {
		pr := chaos.PartitionReplicas{TopicPartition: chaos.TopicPartition{Topic: e.topic, Partition: p.Partition},
			Replicas: nodeList(p.Replicas), Leader: leaders[p.Partition]}
		if mv, ok := moving[p.Partition]; ok {
			pr.Moving, pr.Adding = true, nodeList(mv.AddingReplicas)
			pr.Replicas = nodeList(mv.Replicas)
		}
		out = append(out, pr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("metadata of %s: no partitions", e.topic)
	}
	return out, nil
}

// topicOf is topic's part of a metadata answer.
func topicOf(md *kmsg.MetadataResponse, topic string) (kmsg.MetadataResponseTopic, error) {
	for _, t := range md.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t, kerr.ErrorForCode(t.ErrorCode)
		}
	}
	return kmsg.MetadataResponseTopic{}, fmt.Errorf("metadata: no topic %s", topic)
}

// metadataLeader is the node that says it leads group 0 in the highest
// term, 0 when none does.
func metadataLeader(sts []raftqStatus) int {
	best, term := 0, uint64(0)
	for _, s := range sts {
		if s.Metadata.Role == "leader" && s.Metadata.Term >= term {
			best, term = int(s.NodeID), s.Metadata.Term
		}
	}
	return best
}

// Reassign sends items in one AlterPartitionReassignments request;
// null replicas cancel.
func (e *membersEnv) Reassign(ctx context.Context, items []chaos.Reassignment) ([]error, error) {
	var req kadm.AlterPartitionAssignmentsReq
	for _, it := range items {
		if it.To == nil {
			req.CancelAssign(it.Topic, it.Partition)
			continue
		}
		to := make([]int32, len(it.To))
		for j, id := range it.To {
			to[j] = int32(id)
		}
		req.Assign(it.Topic, it.Partition, to)
	}
	res, err := e.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("alter partition reassignments: %w", err)
	}
	errs := make([]error, len(items))
	for i, it := range items {
		r, ok := res[it.Topic][it.Partition]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("no answer for %s/%d", it.Topic, it.Partition)
		case r.Err != nil && r.ErrMessage != "":
			errs[i] = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		default:
			errs[i] = r.Err
		}
	}
	return errs, nil
}

func nodeList(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// partitionLeaders names the leader of each partition of topic: the
// node that leads it in the highest term any running, unpaused node
// reports.
func partitionLeaders(ctx context.Context, c *chaos.Cluster, topic string) map[int32]int {
	return leadersFrom(statuses(ctx, c), topic)
}

// statuses asks every running, unpaused node for its /v1/status at
// once, and returns the answers by node id.
func statuses(ctx context.Context, c *chaos.Cluster) []raftqStatus {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var sts []raftqStatus
	for _, id := range c.NodeIDs() {
		if !c.Running(id) || c.Paused(id) {
			continue
		}
		wg.Go(func() {
			if s, err := fetchStatus(ctx, c, id); err == nil {
				mu.Lock()
				sts = append(sts, s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(sts, func(a, b raftqStatus) int { return int(a.NodeID) - int(b.NodeID) })
	return sts
}

// leadersFrom is partitionLeaders' choice among statuses.
func leadersFrom(sts []raftqStatus, topic string) map[int32]int {
	out, terms := map[int32]int{}, map[int32]uint64{}
	for _, s := range sts {
		for _, ps := range s.Partitions {
			if ps.Topic == topic && ps.Role == "leader" && ps.Term >= terms[ps.Partition] {
				out[ps.Partition], terms[ps.Partition] = int(s.NodeID), ps.Term
			}
		}
	}
	return out
}

// Decommission asks the admin API of a running node to decommission
// (on) or recommission node id.
func (e *membersEnv) Decommission(ctx context.Context, id int, on bool) error {
	action := "recommission"
	if on {
		action = "decommission"
	}
	var last error = errors.New("jepsen: no running node to ask")
	for _, nid := range e.NodeIDs() {
		if !e.Running(nid) || e.Paused(nid) {
			continue
		}
		n, err := e.Node(nid)
		if err != nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.AdminURL(n, fmt.Sprintf("/v1/brokers/%d/%s", id, action)), nil)
		if err != nil {
			return err
		}
		resp, err := e.HTTPClient().Do(req)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode == http.StatusBadRequest:
			return fmt.Errorf("%s %d refused: %s", action, id, strings.TrimSpace(string(body)))
		}
		last = fmt.Errorf("%s %d via node %d: %s", action, id, nid, resp.Status)
	}
	return last
}
