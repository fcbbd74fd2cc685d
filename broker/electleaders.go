package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// ElectLeaders (KIP-183, KIP-460): a preferred election (type 0) gives
// each partition's leadership to its first replica; an unclean one (type
// 1) elects any live replica of a leaderless partition whose ISR has
// nobody to lead. Any node answers it (Kafka's brokers forward it to the
// controller; here every node can propose to group 0):
//   - ISR partitions: one ElectLeaders command to group 0, which elects
//     at apply with Kafka's answers (coordinator/isr.go electLeader);
//   - raft partitions, preferred: a leadership transfer to the first
//     replica, which only the raft group's leader can make. This node
//     makes it if it leads, else asks the leader it knows through that
//     node's admin API (electleaders_raft.go), following its answer if
//     leadership has moved meanwhile, and answers once the transfer took
//     effect, or when the request's timeout ends;
//   - raft partitions, unclean: INVALID_REQUEST, since raft never elects
//     a leader that may lack committed entries.
//
// With null topics every partition is asked, and, as Kafka does, those
// that need no election are left out of the answer, as are the raft
// partitions of an unclean one.

// Kafka's election types.
const (
	electPreferred int8 = 0
	electUnclean   int8 = 1
)

func (n *Node) serveElectLeaders(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ElectLeadersRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		f.Complete(n.electLeaders(ctx, r), nil)
	}()
	return f
}

// electTarget is one partition an ElectLeaders request names, and its
// outcome.
type electTarget struct {
	topic     string
	partition int32
	ref       coordinator.PartitionRef // Topic nil: unknown
	code      int16
	msg       string
}

func (t *electTarget) fail(code int16, format string, args ...any) {
	t.code, t.msg = code, fmt.Sprintf(format, args...)
}

func (n *Node) electLeaders(ctx context.Context, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := r.ElectionType
	if r.Version == 0 {
		typ = electPreferred // v0 has no election type
	}
	all := r.Topics == nil
	targets := n.electTargets(n.meta.View(), r)
	switch typ {
	case electPreferred, electUnclean:
		n.runElections(ctx, targets, typ == electUnclean)
	default:
		resp.ErrorCode = kerr.InvalidRequest.Code
		for _, t := range targets {
			t.fail(kerr.InvalidRequest.Code, "election type %d: want 0 (preferred) or 1 (unclean)", typ)
		}
	}
	resp.Topics = electResponse(targets, all, typ == electUnclean)
	return resp
}

// electTargets lists the partitions r names, once each in request
// order, or with null topics every partition of every topic, sorted.
func (n *Node) electTargets(st *coordinator.State, r *kmsg.ElectLeadersRequest) []*electTarget {
	var out []*electTarget
	if r.Topics == nil {
		for _, name := range st.TopicNames() {
			t := st.Topics[name]
			for i := range t.Partitions {
				p := &t.Partitions[i]
				out = append(out, &electTarget{topic: name, partition: p.Index, ref: coordinator.PartitionRef{Topic: t, Partition: p}})
			}
		}
		return out
	}
	seen := map[string]map[int32]bool{}
	for _, rt := range r.Topics {
		if seen[rt.Topic] == nil {
			seen[rt.Topic] = map[int32]bool{}
		}
		for _, p := range rt.Partitions {
			if seen[rt.Topic][p] {
				continue
			}
			seen[rt.Topic][p] = true
			t := &electTarget{topic: rt.Topic, partition: p}
			if tp, ok := st.Topics[rt.Topic]; ok && p >= 0 && int(p) < len(tp.Partitions) {
				t.ref = coordinator.PartitionRef{Topic: tp, Partition: &tp.Partitions[p]}
			} else {
				t.fail(kerr.UnknownTopicOrPartition.Code, "no partition %d of topic %q", p, rt.Topic)
			}
			out = append(out, t)
		}
	}
	return out
}

// runElections elects every known target: the ISR ones by one group 0
// command, the raft ones by leadership transfers, at most
// drainConcurrency at once, all until ctx ends.
func (n *Node) runElections(ctx context.Context, targets []*electTarget, unclean bool) {
	var isr, raft []*electTarget
	for _, t := range targets {
		switch {
		case t.ref.Topic == nil:
		case t.ref.Topic.IsISR():
			isr = append(isr, t)
		case unclean:
			t.fail(kerr.InvalidRequest.Code, "%s-%d is a raft partition: raft never elects uncleanly (its leader always holds every committed entry), so only a preferred election applies", t.topic, t.partition)
		default:
			raft = append(raft, t)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if len(isr) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.electISR(ctx, isr, unclean)
		}()
	}
	sem := make(chan struct{}, drainConcurrency)
	for _, t := range raft {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			t.code, t.msg = n.electRaftPreferred(ctx, t.ref.Partition)
		}()
	}
}

// electISR proposes one ElectLeaders for the ISR targets and takes each
// partition's answer from its item. Without a metadata leader every
// target gets NOT_CONTROLLER, which clients retry.
func (n *Node) electISR(ctx context.Context, targets []*electTarget, unclean bool) {
	if unclean {
		if id, ok := n.brokerWithout(func(b *coordinator.Broker) bool { return b.ElectUnclean }); ok {
			for _, t := range targets {
				t.fail(kerr.UnsupportedVersion.Code, "broker %d runs a version without unclean ElectLeaders; its metadata would diverge", id)
			}
			return
		}
	}
	cmd := &coordinator.ElectLeaders{Preferred: !unclean, Unclean: unclean}
	for _, t := range targets {
		cmd.Groups = append(cmd.Groups, t.ref.Partition.Group)
	}
	res, err := n.ctl.Propose(ctx, &coordinator.Command{ElectLeaders: cmd})
	if err = firstErr(metaKafkaError(err), res.Err); err == nil && len(res.Items) != len(targets) {
		err = fmt.Errorf("%d results for %d partitions", len(res.Items), len(targets))
	}
	for i, t := range targets {
		e := err
		if e == nil {
			e = res.Items[i].Err
		}
		code, msg := coordinator.KafkaError(e)
		t.code = code
		switch {
		case code == kerr.ElectionNotNeeded.Code:
			t.msg = fmt.Sprintf("replica %d leads already", res.Items[i].Partition.Leader)
		case msg != nil:
			t.msg = *msg
		}
	}
}

// electResponse groups the outcomes by topic, in target order. With
// all (null topics), partitions that needed no election, and raft
// partitions of an unclean election, are left out.
func electResponse(targets []*electTarget, all, unclean bool) []kmsg.ElectLeadersResponseTopic {
	var out []kmsg.ElectLeadersResponseTopic
	index := map[string]int{}
	for _, t := range targets {
		if all && (t.code == kerr.ElectionNotNeeded.Code || unclean && !t.ref.Topic.IsISR()) {
			continue
		}
		i, ok := index[t.topic]
		if !ok {
			i = len(out)
			index[t.topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.topic
			out = append(out, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = t.partition, t.code
		if t.msg != "" {
			msg := t.msg
			rp.ErrorMessage = &msg
		}
		out[i].Partitions = append(out[i].Partitions, rp)
	}
	return out
}
