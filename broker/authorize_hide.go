package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// hideTopics leaves out of a DescribeTopicPartitions of every topic the
// topics the principal may not describe, as Kafka: not seeing them is
// not a refusal.
func hideTopics(n *Node, c *kafka.Conn, _ int16, req kmsg.Request, resp kmsg.Response) {
	if len(req.(*kmsg.DescribeTopicPartitionsRequest).Topics) > 0 {
		return
	}
	r := resp.(*kmsg.DescribeTopicPartitionsResponse)
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		if t.Topic != nil && n.allowedQuiet(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, *t.Topic) {
			kept = append(kept, t)
		}
	}
	r.Topics = kept
}

// offsetFetchTopics answers the topics of an OffsetFetch the principal
// may not describe: left out when the request asked for all the group's
// topics, TOPIC_AUTHORIZATION_FAILED with no offset when it named them.
func offsetFetchTopics(n *Node, c *kafka.Conn, key int16, req kmsg.Request, resp kmsg.Response) {
	q, r := req.(*kmsg.OffsetFetchRequest), resp.(*kmsg.OffsetFetchResponse)
	if q.Version < 8 {
		r.Topics = n.offsetFetchVisible(c, key, q.Topics != nil, r.Topics)
		return
	}
	named := map[string]bool{}
	for _, g := range q.Groups {
		named[g.Group] = g.Topics != nil
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		g.Topics = offsetFetchGroupVisible(n, c, key, named[g.Group], g.Topics)
	}
}

func (n *Node) offsetFetchVisible(c *kafka.Conn, key int16, named bool, ts []kmsg.OffsetFetchResponseTopic) []kmsg.OffsetFetchResponseTopic {
	kept := ts[:0]
	for _, t := range ts {
		if n.offsetFetchTopic(c, key, named, t.Topic, func() {
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
			}
		}) {
			kept = append(kept, t)
		}
	}
	return kept
}

func offsetFetchGroupVisible(n *Node, c *kafka.Conn, key int16, named bool, ts []kmsg.OffsetFetchResponseGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	kept := ts[:0]
	for _, t := range ts {
		if n.offsetFetchTopic(c, key, named, t.Topic, func() {
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
			}
		}) {
			kept = append(kept, t)
		}
	}
	return kept
}

// offsetFetchTopic reports whether an OffsetFetch answer keeps topic: a
// topic of an all-topics fetch only if it may be described (unaudited);
// a named one always, refused (refuse sets its partitions' error) unless
// it may be described.
func (n *Node) offsetFetchTopic(c *kafka.Conn, key int16, named bool, topic string, refuse func()) bool {
	if !named {
		return n.allowedQuiet(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
	}
	if !n.allowed(c, key, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic) {
		refuse()
	}
	return true
}

// hideGroups leaves out of ListGroups the groups the principal may not
// describe, unless it may describe the cluster (Kafka's rule).
func hideGroups(n *Node, c *kafka.Conn, _ int16, _ kmsg.Request, resp kmsg.Response) {
	if n.allowedQuiet(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, clusterResource) {
		return
	}
	r := resp.(*kmsg.ListGroupsResponse)
	r.Groups = slices.DeleteFunc(r.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return !n.allowedQuiet(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group)
	})
}

// hideTransactions leaves out of ListTransactions the transactional ids
// the principal may not describe.
func hideTransactions(n *Node, c *kafka.Conn, _ int16, _ kmsg.Request, resp kmsg.Response) {
	r := resp.(*kmsg.ListTransactionsResponse)
	r.TransactionStates = slices.DeleteFunc(r.TransactionStates, func(t kmsg.ListTransactionsResponseTransactionState) bool {
		return !n.allowedQuiet(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, t.TransactionalID)
	})
}

// createTopicsConfigs withholds a created topic's configs (v5+) from a
// principal that may not DESCRIBE_CONFIGS it, as Kafka: ConfigErrorCode
// says why.
func createTopicsConfigs(n *Node, c *kafka.Conn, _ int16, _ kmsg.Request, resp kmsg.Response) {
	r := resp.(*kmsg.CreateTopicsResponse)
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.ErrorCode == 0 && len(t.Configs) > 0 && !n.allowedQuiet(c, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, t.Topic) {
			t.Configs, t.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
		}
	}
}
