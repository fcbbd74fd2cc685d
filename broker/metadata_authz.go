package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// metadataGate is what one Metadata request may see, after Kafka's
// handleTopicMetadataRequest: a request for all topics lists only those
// the principal may DESCRIBE; a named topic it may not describe, or a
// missing one it may describe but not CREATE (on the cluster or the
// topic) when the request would auto-create it, is answered
// TOPIC_AUTHORIZATION_FAILED, whether it exists or not. nil lets
// everything through (the authorizer is off).
type metadataGate struct {
	n      *Node
	c      *kafka.Conn
	denied map[string]bool
	byID   map[string]bool // denied topics the request named by id alone
}

func (n *Node) metadataGate(c *kafka.Conn, r *kmsg.MetadataRequest) *metadataGate {
	if !n.cfg.Authorizer {
		return nil
	}
	g := &metadataGate{n: n, c: c, denied: map[string]bool{}, byID: map[string]bool{}}
	st := n.meta.View()
	create := n.cfg.AutoCreateTopics && allowsAutoCreate(r)
	for _, rt := range r.Topics {
		t := lookupTopic(st, rt.Topic, rt.TopicID)
		name := ""
		switch {
		case t != nil:
			name = t.Name
		case rt.Topic != nil:
			name = *rt.Topic
		}
		if name == "" {
			continue // an unknown id: UNKNOWN_TOPIC_ID as before
		}
		if !n.allowed(c, r.Key(), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			g.denied[name], g.byID[name] = true, rt.Topic == nil || *rt.Topic == ""
			continue
		}
		if t == nil && create && !n.allowedQuiet(c, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, clusterResource) &&
			!n.allowed(c, r.Key(), kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name) {
			g.denied[name] = true
		}
	}
	return g
}

// creatable is names less those denied.
func (g *metadataGate) creatable(names []string) []string {
	if g == nil {
		return names
	}
	var out []string
	for _, name := range names {
		if !g.denied[name] {
			out = append(out, name)
		}
	}
	return out
}

// apply hides and refuses in resp what the principal may not see.
func (g *metadataGate) apply(r *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) *kmsg.MetadataResponse {
	if g == nil {
		return resp
	}
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		switch {
		case all && !g.n.allowedQuiet(g.c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name):
			continue
		case g.denied[name]:
			// The answer names the topic as the request did: an id
			// does not learn its name.
			d := kmsg.NewMetadataResponseTopic()
			d.Topic, d.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			if g.byID[name] {
				d.Topic, d.TopicID = nil, t.TopicID
			}
			t = d
		}
		kept = append(kept, t)
	}
	resp.Topics = kept
	return resp
}
