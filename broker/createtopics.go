package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveCreateTopics proposes each topic to the metadata group (any node
// forwards to its leader) and waits, within the request's timeout, until
// every new partition has a leader, so that a client can produce at once.
func (n *Node) serveCreateTopics(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for i := range r.Topics {
			resp.Topics = append(resp.Topics, n.createTopic(ctx, &r.Topics[i], r.ValidateOnly))
		}
		f.Complete(resp, nil)
	}()
	return f
}

func requestTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}

func (n *Node) createTopic(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) kmsg.CreateTopicsResponseTopic {
	out := kmsg.NewCreateTopicsResponseTopic()
	out.Topic, out.NumPartitions, out.ReplicationFactor = rt.Topic, -1, -1
	cmd := n.createCommand(rt)
	var res coordinator.Result
	var err error
	if err := coordinator.CheckCreate(cmd.Configs, createRF(cmd)); err != nil {
		// Rules apply cannot hold for old logs' sake: checked here,
		// before anything is proposed, validateOnly or not.
		out.ErrorCode, out.ErrorMessage = coordinator.KafkaError(err)
		return out
	}
	if validateOnly {
		res = n.meta.Try(&coordinator.Command{CreateTopic: cmd})
	} else {
		res, err = n.ctl.Propose(ctx, &coordinator.Command{CreateTopic: cmd})
	}
	if err = firstErr(metaKafkaError(err), res.Err); err != nil {
		out.ErrorCode, out.ErrorMessage = coordinator.KafkaError(err)
		return out
	}
	t := res.Topic
	out.TopicID, out.NumPartitions, out.ReplicationFactor = t.ID, int32(len(t.Partitions)), int16(t.ReplicationFactor())
	for _, d := range coordinator.TopicConfigDefs() {
		cfg := kmsg.NewCreateTopicsResponseTopicConfig()
		v := t.Config(d.Name)
		cfg.Name, cfg.Value, cfg.Source = d.Name, &v, int8(configSource(t, d.Name))
		cfg.ReadOnly = configReadOnly(t, d)
		out.Configs = append(out.Configs, cfg)
	}
	if !validateOnly {
		n.awaitLeaders(ctx, t.Name)
	}
	return out
}

func (n *Node) createCommand(rt *kmsg.CreateTopicsRequestTopic) *coordinator.CreateTopic {
	c := &coordinator.CreateTopic{Name: rt.Topic, ID: newTopicID(), Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Configs: map[string]string{}, RefuseCollision: true, AllowISR: true, ConfigVersion: coordinator.CurrentConfigVersion}
	if c.Partitions == -1 {
		c.Partitions = n.cfg.DefaultPartitions
	}
	if c.ReplicationFactor == -1 {
		c.ReplicationFactor = min(n.cfg.DefaultReplicationFactor, int16(max(1, liveBrokers(n.meta.View()))))
	}
	for _, cfg := range rt.Configs {
		if cfg.Value != nil {
			c.Configs[cfg.Name] = *cfg.Value
		}
	}
	if len(rt.ReplicaAssignment) > 0 {
		c.Assignment = make([][]uint64, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if int(a.Partition) < len(c.Assignment) && a.Partition >= 0 {
				for _, id := range a.Replicas {
					c.Assignment[a.Partition] = append(c.Assignment[a.Partition], uint64(id))
				}
			}
		}
		c.Partitions = int32(len(rt.ReplicaAssignment))
	}
	return c
}

// createRF is the replication factor cmd will get: its assignment's, or
// the one it asks for (the broker's default already filled in).
func createRF(cmd *coordinator.CreateTopic) int {
	if len(cmd.Assignment) > 0 {
		return len(cmd.Assignment[0])
	}
	return int(cmd.ReplicationFactor)
}

// awaitLeaders waits until every partition of topic has a known, live
// leader, or ctx ends.
func (n *Node) awaitLeaders(ctx context.Context, topic string) {
	for {
		changed := n.meta.Changed()
		if n.allLed(topic) {
			return
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// allLed reports whether every partition of topic has a live leader. An
// ISR partition has one in the metadata as soon as it is placed; where
// that leader is this node, it must also have opened its replica and
// taken the role, so that a produce right after the answer finds it.
func (n *Node) allLed(topic string) bool {
	st := n.meta.View()
	t, ok := st.Topics[topic]
	if !ok {
		return true
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		leader, _ := n.leaderOf(p)
		if b, ok := st.Brokers[leader]; !ok || !b.Alive {
			return false
		}
		if t.IsISR() && leader == n.cfg.NodeID {
			if r := n.replicaByGroup(p.Group); r == nil || !r.lead.Leadership().IsLeader {
				return false
			}
		}
	}
	return true
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// configSource is DescribeConfigs' source of a topic config value: the
// topic's own, the cluster's default from a broker config
// (STATIC_BROKER_CONFIG, as Kafka names a server.properties value), or
// Kafka's default.
func configSource(t *coordinator.Topic, name string) kmsg.ConfigSource {
	if _, ok := t.Configs[name]; ok {
		return kmsg.ConfigSourceDynamicTopicConfig
	}
	if _, ok := t.ClusterDefault(name); ok {
		return kmsg.ConfigSourceStaticBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}
