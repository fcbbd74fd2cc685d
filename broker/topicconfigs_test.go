package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicReq creates one topic with configs, as kafka-topics does.
func createTopicReq(name string, partitions int32, rf int16, validateOnly bool, cfgs map[string]string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range cfgs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, new(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func wantRefused(t *testing.T, what string, code int16, msg *string, want string) {
	t.Helper()
	if code != kerr.InvalidConfig.Code || msg == nil || !strings.Contains(*msg, want) {
		m := "<nil>"
		if msg != nil {
			m = *msg
		}
		t.Errorf("%s: error %d %q, want INVALID_CONFIG (%d) with %q", what, code, m, kerr.InvalidConfig.Code, want)
	}
}

// Every refusal of the ISR configs, through CreateTopics and both
// AlterConfigs, with and without validateOnly: Kafka's code, a message
// that says why, and no change.
func TestNode_ISRConfigRefusals(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"replication.mode": new("isr"), "min.insync.replicas": new("2")}, "i"); err != nil {
		t.Fatal(err)
	}
	// Every node's preflight must see both topics (a lagging one would
	// answer validateOnly with UNKNOWN_TOPIC_OR_PARTITION).
	eventually(t, "every node knows r and i", func() bool {
		for _, n := range c.nodes {
			if ts := n.Metadata().Topics; ts["r"] == nil || ts["i"] == nil {
				return false
			}
		}
		return true
	})

	creates := []struct {
		name string
		rf   int16
		cfgs map[string]string
		want string
	}{
		{"raft min.insync.replicas", 3, map[string]string{"min.insync.replicas": "2"}, "min.insync.replicas applies to replication.mode=isr; a raft topic's acks=all waits for a majority of its replicas"},
		{"raft unclean", 3, map[string]string{"replication.mode": "raft", "unclean.leader.election.enable": "true"}, "unclean.leader.election.enable applies to replication.mode=isr"},
		{"raft flush.messages", 3, map[string]string{"flush.messages": "1"}, "durability is the node's --fsync policy"},
		{"raft flush.ms", 3, map[string]string{"flush.ms": "100"}, "flush.ms applies to replication.mode=isr"},
		{"isr min.insync.replicas > rf", 3, map[string]string{"replication.mode": "isr", "min.insync.replicas": "4"}, "min.insync.replicas 4 exceeds the replication factor 3"},
		{"isr min.insync.replicas > default rf", -1, map[string]string{"replication.mode": "isr", "min.insync.replicas": "4"}, "exceeds the replication factor 3"},
	}
	for _, cr := range creates {
		for _, validateOnly := range []bool{false, true} {
			resp := requestFrom[*kmsg.CreateTopicsResponse](t, cl, 2, createTopicReq("bad", 1, cr.rf, validateOnly, cr.cfgs))
			rt := resp.Topics[0]
			wantRefused(t, cr.name, rt.ErrorCode, rt.ErrorMessage, cr.want)
		}
	}

	alters := []struct {
		name  string
		topic string
		set   map[string]string
		del   []string
		want  string
	}{
		{"raft min.insync.replicas", "r", map[string]string{"min.insync.replicas": "2"}, nil, "a raft topic's acks=all waits for a majority"},
		{"raft flush.ms", "r", map[string]string{"flush.ms": "5"}, nil, "flush.ms applies to replication.mode=isr"},
		{"raft to isr", "r", map[string]string{"replication.mode": "isr"}, nil, "replication.mode cannot change after creation"},
		{"isr to raft", "i", map[string]string{"replication.mode": "raft"}, nil, "replication.mode cannot change after creation"},
		{"isr mode deleted", "i", nil, []string{"replication.mode"}, "replication.mode cannot change after creation"},
		{"isr min.insync.replicas > rf", "i", map[string]string{"min.insync.replicas": "4"}, nil, "exceeds the replication factor 3"},
	}
	for _, a := range alters {
		for _, validateOnly := range []bool{false, true} {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.ValidateOnly = validateOnly
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, a.topic
			for k, v := range a.set {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value, c.Op = k, new(v), kmsg.IncrementalAlterConfigOpSet
				rr.Configs = append(rr.Configs, c)
			}
			for _, k := range a.del {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
				rr.Configs = append(rr.Configs, c)
			}
			req.Resources = append(req.Resources, rr)
			resp := requestFrom[*kmsg.IncrementalAlterConfigsResponse](t, cl, 3, req)
			wantRefused(t, "incremental: "+a.name, resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage, a.want)
		}
	}
	// sarama's AlterConfigs replaces every config: leaving the mode out
	// of an ISR topic's would change it.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "i"
	rc := kmsg.NewAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "retention.ms", new("1000")
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	resp := requestFrom[*kmsg.AlterConfigsResponse](t, cl, 1, req)
	wantRefused(t, "non-incremental without the mode", resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage, "name replication.mode=isr or use IncrementalAlterConfigs")

	st := c.nodes[1].Metadata()
	if _, ok := st.Topics["bad"]; ok {
		t.Error("a refused create made topic bad")
	}
	if got := st.Topics["r"].Configs; len(got) != 0 {
		t.Errorf("raft topic configs %v after refused alters, want none", got)
	}
	if got := st.Topics["i"].Configs; len(got) != 2 || got["min.insync.replicas"] != "2" || got["replication.mode"] != "isr" {
		t.Errorf("isr topic configs %v after refused alters, want its creation's", got)
	}

	// What is allowed still is.
	if res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: new("3")}, {Name: "flush.messages", Value: new("1")}}, "i"); err != nil || res[0].Err != nil {
		t.Errorf("altering an ISR topic's ISR configs: %v %v", err, res)
	}
	if res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: new("5000")}, {Name: "replication.mode", Value: new("raft")}}, "r"); err != nil || res[0].Err != nil {
		t.Errorf("altering a raft topic's other configs: %v %v", err, res)
	}
}

// DescribeConfigs shows the ISR configs with Kafka's types, their source
// (the default, or the topic's own value), and as read-only where a
// request may not set them.
func TestNode_DescribeISRConfigs(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	adm := kadm.NewClient(c.client())
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "r"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": new("isr"), "flush.messages": new("1")}, "i")
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	type entry struct {
		value    string
		typ      kmsg.ConfigType
		src      kmsg.ConfigSource
		readOnly bool
	}
	def, topic := kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceDynamicTopicConfig
	want := map[string]map[string]entry{
		"r": {
			"replication.mode":               {"raft", kmsg.ConfigTypeString, def, true},
			"min.insync.replicas":            {"1", kmsg.ConfigTypeInt, def, true},
			"unclean.leader.election.enable": {"false", kmsg.ConfigTypeBoolean, def, true},
			"flush.messages":                 {"9223372036854775807", kmsg.ConfigTypeLong, def, true},
			"flush.ms":                       {"9223372036854775807", kmsg.ConfigTypeLong, def, true},
		},
		"i": {
			"replication.mode":               {"isr", kmsg.ConfigTypeString, topic, true},
			"min.insync.replicas":            {"1", kmsg.ConfigTypeInt, def, false},
			"unclean.leader.election.enable": {"false", kmsg.ConfigTypeBoolean, def, false},
			"flush.messages":                 {"1", kmsg.ConfigTypeLong, topic, false},
			"flush.ms":                       {"9223372036854775807", kmsg.ConfigTypeLong, def, false},
		},
	}
	for name, w := range want {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, rr)
		resp := rawRequest(t, c, 1, req).(*kmsg.DescribeConfigsResponse)
		got := map[string]entry{}
		for _, cfg := range resp.Resources[0].Configs {
			got[cfg.Name] = entry{*cfg.Value, cfg.ConfigType, cfg.Source, cfg.ReadOnly}
		}
		for k, e := range w {
			if got[k] != e {
				t.Errorf("topic %s: %s described as %+v, want %+v", name, k, got[k], e)
			}
		}
	}
}

// --eligible-leader-replicas reaches group 0: the metadata leader turns
// the cluster's feature on, and a cluster without the flag leaves it off.
func TestNode_EligibleLeaderReplicasFlag(t *testing.T) {
	on := newTestCluster(t, 3, func(cfg *Config) { cfg.EligibleLeaderReplicas = true })
	eventually(t, "the ELR feature on every node", func() bool {
		for _, n := range on.nodes {
			if !n.Metadata().EligibleLeaderReplicas {
				return false
			}
		}
		return true
	})
	off := newTestCluster(t, 1, nil)
	createTopic(t, off.client(), "x", 1, 1) // a metadata leader that has acted
	if off.nodes[1].Metadata().EligibleLeaderReplicas {
		t.Error("the ELR feature is on without the flag")
	}
}
