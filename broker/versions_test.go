package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionCase fills a request made by kmsg's New* (so every field keeps
// its kmsg default) before it is sent at version v, and checks the answer.
// The broker decodes the request at v, so a field that v lacks holds its
// decoded default: the case checks the broker reads it as Kafka implies.
type versionCase struct {
	fill  func(t *testing.T, v int16, req kmsg.Request)
	check func(t *testing.T, v int16, resp kmsg.Response)
}

// TestNode_EveryAPIVersionWithDefaults sends every version of every API
// the broker serves, with default fields, over the wire, and checks that
// the answer decodes at that version and, where Kafka implies a value for
// a field that older versions lack, that the broker acts on that value.
func TestNode_EveryAPIVersionWithDefaults(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.AutoCreateTopics, cfg.DefaultPartitions = true, 1
		cfg.GroupInitialRebalanceDelay, cfg.OffsetsPartitions = 0, 1
	})
	cl := c.client()
	createTopic(t, cl, "audit", 1, 1)
	produceSync(t, cl, "audit", 0, "one")
	n := c.nodes[1]
	addr := c.cfgs[1].KafkaAddr
	auditID := n.meta.View().Topics["audit"].ID
	// One offsets partition, loaded once a commit to it succeeds.
	eventually(t, "a loaded group coordinator", func() bool {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(9)
		req.Group = "audit-g"
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.Partitions = "audit", []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		resp := rawKafka(t, addr, req).(*kmsg.OffsetCommitResponse)
		return len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].ErrorCode == 0
	})
	cases := versionCases(n, auditID)
	keys := make([]int16, 0, len(n.apis))
	ranges := map[int16][2]int16{}
	for _, a := range n.apis {
		keys = append(keys, a.Key)
		ranges[a.Key] = [2]int16{a.MinVersion, a.MaxVersion}
	}
	// Key order puts OffsetCommit (8) before OffsetFetch (9), ListGroups
	// (16) and DescribeGroups (15), and CreateTopics (19) before
	// DeleteTopics (20): later cases read what earlier ones wrote.
	slices.Sort(keys)
	for _, key := range keys {
		for v := ranges[key][0]; v <= ranges[key][1]; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := kmsg.RequestForKey(key)
				req.SetVersion(v)
				vc := cases[key]
				if vc.fill != nil {
					vc.fill(t, v, req)
				}
				resp := rawKafka(t, addr, req)
				if got := resp.GetVersion(); got != v {
					t.Fatalf("response version %d, want %d", got, v)
				}
				if vc.check != nil {
					vc.check(t, v, resp)
				}
			})
		}
	}
}

func versionCases(n *Node, auditID [16]byte) map[int16]versionCase {
	errIs := func(t *testing.T, what string, code int16, want *kerr.Error) {
		t.Helper()
		if code != want.Code {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(code), want)
		}
	}
	ok := func(t *testing.T, what string, code int16) {
		t.Helper()
		if code != 0 {
			t.Errorf("%s: %v, want no error", what, kerr.ErrorForCode(code))
		}
	}
	exists := func(topic string) bool { return n.meta.View().Topics[topic] != nil }
	return map[int16]versionCase{
		kmsg.ApiVersions.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				r := req.(*kmsg.ApiVersionsRequest)
				r.ClientSoftwareName, r.ClientSoftwareVersion = "raftq-test", "1.0"
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.ApiVersionsResponse)
				ok(t, "api versions", r.ErrorCode)
				if len(r.ApiKeys) != len(n.apis) {
					t.Errorf("%d api keys advertised, want %d", len(r.ApiKeys), len(n.apis))
				}
			},
		},
		// Default Topics: v0's empty list and v1+'s null both mean all
		// topics. The auto-creation implied by v0-v3 is in
		// TestNode_MetadataAutoCreateByVersion.
		kmsg.Metadata.Int16(): {
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.MetadataResponse)
				if !slices.ContainsFunc(r.Topics, func(mt kmsg.MetadataResponseTopic) bool { return mt.Topic != nil && *mt.Topic == "audit" }) {
					t.Errorf("metadata of all topics lacks \"audit\": %d topics", len(r.Topics))
				}
			},
		},
		kmsg.Produce.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) { req.(*kmsg.ProduceRequest).Acks = -1 },
		},
		// MaxBytes (v3+) is unlimited before v3, IsolationLevel (v4+)
		// read-uncommitted, CurrentLeaderEpoch (v9+) -1: no check.
		kmsg.Fetch.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.FetchRequest)
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "audit", auditID
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.FetchResponse)
				ok(t, "fetch", r.ErrorCode)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("fetch answered %d topics, want 1 with 1 partition", len(r.Topics))
				}
				sp := r.Topics[0].Partitions[0]
				ok(t, "fetch partition", sp.ErrorCode)
				if sp.HighWatermark != 1 || len(sp.RecordBatches) == 0 {
					t.Errorf("fetch: high watermark %d, %d bytes of records; want 1 and the record", sp.HighWatermark, len(sp.RecordBatches))
				}
			},
		},
		// MaxNumOffsets (v0 only) defaults to 1; IsolationLevel (v2+)
		// is read-uncommitted; CurrentLeaderEpoch (v4+) -1.
		kmsg.ListOffsets.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				r := req.(*kmsg.ListOffsetsRequest)
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "audit"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1 // latest
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.ListOffsetsResponse)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("list offsets answered %d topics, want 1 with 1 partition", len(r.Topics))
				}
				sp := r.Topics[0].Partitions[0]
				ok(t, "list offsets", sp.ErrorCode)
				if v == 0 && !slices.Equal(sp.OldStyleOffsets, []int64{1}) {
					t.Errorf("v0 offsets %v, want [1]", sp.OldStyleOffsets)
				}
				if v > 0 && sp.Offset != 1 {
					t.Errorf("offset %d, want 1", sp.Offset)
				}
			},
		},
		// CurrentLeaderEpoch (v2+) is -1, no fencing; ReplicaID (v3+)
		// -2, a consumer.
		kmsg.OffsetForLeaderEpoch.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				r := req.(*kmsg.OffsetForLeaderEpochRequest)
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "audit"
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.LeaderEpoch = n.replicaFor("audit", 0).lead.Leadership().Epoch
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.OffsetForLeaderEpochResponse)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("answered %d topics, want 1 with 1 partition", len(r.Topics))
				}
				sp := r.Topics[0].Partitions[0]
				ok(t, "offset for leader epoch", sp.ErrorCode)
				if sp.EndOffset != 1 {
					t.Errorf("end offset %d, want 1", sp.EndOffset)
				}
			},
		},
		// ProducerID and ProducerEpoch (v3+) are -1: a new producer.
		kmsg.InitProducerID.Int16(): {
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.InitProducerIDResponse)
				ok(t, "init producer id", r.ErrorCode)
				if r.ProducerID < 0 || r.ProducerEpoch != 0 {
					t.Errorf("producer id %d epoch %d, want a new id at epoch 0", r.ProducerID, r.ProducerEpoch)
				}
			},
		},
		// ValidateOnly (v1+) is false: the topic is created.
		kmsg.CreateTopics.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.CreateTopicsRequest)
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("ct-v%d", v), 1, 1
				r.Topics = append(r.Topics, rt)
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.CreateTopicsResponse)
				if len(r.Topics) != 1 {
					t.Fatalf("answered %d topics, want 1", len(r.Topics))
				}
				ok(t, "create topic", r.Topics[0].ErrorCode)
				if name := fmt.Sprintf("ct-v%d", v); !exists(name) {
					t.Errorf("topic %s not created", name)
				}
			},
		},
		// TopicNames before v6, Topics from v6.
		kmsg.DeleteTopics.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.DeleteTopicsRequest)
				name := fmt.Sprintf("ct-v%d", v)
				if v < 6 {
					r.TopicNames = []string{name}
					return
				}
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = &name
				r.Topics = append(r.Topics, dt)
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.DeleteTopicsResponse)
				if len(r.Topics) != 1 {
					t.Fatalf("answered %d topics, want 1", len(r.Topics))
				}
				ok(t, "delete topic", r.Topics[0].ErrorCode)
				if name := fmt.Sprintf("ct-v%d", v); exists(name) {
					t.Errorf("topic %s not deleted", name)
				}
			},
		},
		// IncludeSynonyms (v1+) and IncludeDocumentation (v3+) are false.
		kmsg.DescribeConfigs.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				r := req.(*kmsg.DescribeConfigsRequest)
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "audit"
				r.Resources = append(r.Resources, rr)
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.DescribeConfigsResponse)
				if len(r.Resources) != 1 {
					t.Fatalf("answered %d resources, want 1", len(r.Resources))
				}
				ok(t, "describe configs", r.Resources[0].ErrorCode)
				if len(r.Resources[0].Configs) == 0 {
					t.Error("no configs described")
				}
				defaults := 0
				for _, c := range r.Resources[0].Configs {
					if len(c.ConfigSynonyms) > 0 || c.Documentation != nil {
						t.Errorf("config %s has synonyms or documentation, not asked for", c.Name)
					}
					if c.IsDefault {
						defaults++
					}
				}
				// v0 has IsDefault where later versions have Source; the
				// topic has no overrides.
				if v == 0 && defaults != len(r.Resources[0].Configs) {
					t.Errorf("v0: %d of %d configs marked default, want all", defaults, len(r.Resources[0].Configs))
				}
			},
		},
		// EndpointType (v1+) is 1: brokers.
		kmsg.DescribeCluster.Int16(): {
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.DescribeClusterResponse)
				ok(t, "describe cluster", r.ErrorCode)
				if len(r.Brokers) != 1 {
					t.Errorf("%d brokers, want 1", len(r.Brokers))
				}
			},
		},
		// ElectionType (v1+) is 0: preferred; v0 has none and is
		// preferred too. The lone node leads audit-0 already.
		kmsg.ElectLeaders.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = "audit", []int32{0}
				req.(*kmsg.ElectLeadersRequest).Topics = []kmsg.ElectLeadersRequestTopic{rt}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.ElectLeadersResponse)
				ok(t, "elect leaders", r.ErrorCode)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("answered %+v, want audit-0", r.Topics)
				}
				errIs(t, "elect audit-0", r.Topics[0].Partitions[0].ErrorCode, kerr.ElectionNotNeeded)
			},
		},
		// A marker for a topic that does not exist: refused per
		// partition, whatever the version.
		kmsg.WriteTxnMarkers.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.Committed = 1, true
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = "no-such-topic", []int32{0}
				m.Topics = append(m.Topics, mt)
				req.(*kmsg.WriteTxnMarkersRequest).Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.WriteTxnMarkersResponse)
				if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 1 {
					t.Fatalf("answered %+v, want one partition", r.Markers)
				}
				errIs(t, "marker", r.Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
			},
		},
		kmsg.DescribeProducers.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = "audit", []int32{0}
				req.(*kmsg.DescribeProducersRequest).Topics = []kmsg.DescribeProducersRequestTopic{rt}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.DescribeProducersResponse)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("answered %+v, want audit-0", r.Topics)
				}
				ok(t, "describe producers audit-0", r.Topics[0].Partitions[0].ErrorCode)
			},
		},
		// ResourcePatternType (v1+) is LITERAL before v1. Without an
		// authorizer every ACL API answers SECURITY_DISABLED.
		kmsg.DescribeACLs.Int16(): {
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				errIs(t, "describe acls", resp.(*kmsg.DescribeACLsResponse).ErrorCode, kerr.SecurityDisabled)
			},
		},
		kmsg.CreateACLs.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "audit", "User:a", "*"
				c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				req.(*kmsg.CreateACLsRequest).Creations = []kmsg.CreateACLsRequestCreation{c}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.CreateACLsResponse)
				if len(r.Results) != 1 {
					t.Fatalf("%d results, want 1", len(r.Results))
				}
				errIs(t, "create acls", r.Results[0].ErrorCode, kerr.SecurityDisabled)
			},
		},
		kmsg.DeleteACLs.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				req.(*kmsg.DeleteACLsRequest).Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.DeleteACLsResponse)
				if len(r.Results) != 1 {
					t.Fatalf("%d results, want 1", len(r.Results))
				}
				errIs(t, "delete acls", r.Results[0].ErrorCode, kerr.SecurityDisabled)
			},
		},
		// CoordinatorType (v1+) is 0: a group. CoordinatorKey before v4,
		// CoordinatorKeys from v4.
		kmsg.FindCoordinator.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.FindCoordinatorRequest)
				if v < 4 {
					r.CoordinatorKey = "audit-g"
				} else {
					r.CoordinatorKeys = []string{"audit-g"}
				}
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.FindCoordinatorResponse)
				code, node := r.ErrorCode, r.NodeID
				if v >= 4 {
					if len(r.Coordinators) != 1 {
						t.Fatalf("%d coordinators, want 1", len(r.Coordinators))
					}
					code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
				}
				ok(t, "find coordinator", code)
				if node != 1 {
					t.Errorf("coordinator %d, want 1", node)
				}
			},
		},
		// RebalanceTimeoutMillis (v1+) decodes as -1 in v0, where Kafka
		// takes the session timeout: the join must still complete. From
		// v4 a first join gets a member id to join with.
		kmsg.JoinGroup.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.JoinGroupRequest)
				r.Group, r.SessionTimeoutMillis, r.ProtocolType = fmt.Sprintf("join-v%d", v), 30000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
				r.Protocols = append(r.Protocols, p)
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.JoinGroupResponse)
				if v >= 4 {
					errIs(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
					return
				}
				ok(t, "join", r.ErrorCode)
				if r.Generation < 1 || r.MemberID == "" || r.LeaderID != r.MemberID {
					t.Fatalf("join: generation %d member %q leader %q, want a generation led by the member", r.Generation, r.MemberID, r.LeaderID)
				}
				group := fmt.Sprintf("join-v%d", v)
				coord, code := n.groupCoordinator(group)
				if code != 0 {
					t.Fatalf("coordinator of %s: %v", group, kerr.ErrorForCode(code))
				}
				g := coord.Machine().Group(group)
				if g == nil || g.Members[r.MemberID] == nil {
					t.Fatalf("member %s of %s not in the replicated group", r.MemberID, group)
				}
				if got := g.Members[r.MemberID].RebalanceTimeoutMs; got != 30000 {
					t.Errorf("rebalance timeout %d ms, want the session timeout, 30000 (v0 has none; -1 means none)", got)
				}
			},
		},
		// Generation (v1+) is -1 and MemberID (v1+) empty: a simple
		// commit, which Kafka accepts for a group without members.
		kmsg.OffsetCommit.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.OffsetCommitRequest)
				r.Group = fmt.Sprintf("commit-v%d", v)
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = "audit"
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset = 1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.OffsetCommitResponse)
				if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
					t.Fatalf("answered %d topics, want 1 with 1 partition", len(r.Topics))
				}
				ok(t, "simple commit", r.Topics[0].Partitions[0].ErrorCode)
			},
		},
		// Topics is required in v0-v1 and null (all) by default from v2;
		// Group before v8, Groups from v8.
		kmsg.OffsetFetch.Int16(): {
			fill: func(_ *testing.T, v int16, req kmsg.Request) {
				r := req.(*kmsg.OffsetFetchRequest)
				switch {
				case v < 2:
					r.Group = "commit-v0"
					rt := kmsg.NewOffsetFetchRequestTopic()
					rt.Topic, rt.Partitions = "audit", []int32{0}
					r.Topics = append(r.Topics, rt)
				case v < 8:
					r.Group = "commit-v0"
				default:
					g := kmsg.NewOffsetFetchRequestGroup()
					g.Group = "commit-v0"
					r.Groups = append(r.Groups, g)
				}
			},
			check: func(t *testing.T, v int16, resp kmsg.Response) {
				r := resp.(*kmsg.OffsetFetchResponse)
				var offs []int64
				if v < 8 {
					ok(t, "offset fetch", r.ErrorCode)
					for _, rt := range r.Topics {
						for _, p := range rt.Partitions {
							offs = append(offs, p.Offset)
						}
					}
				} else {
					if len(r.Groups) != 1 {
						t.Fatalf("answered %d groups, want 1", len(r.Groups))
					}
					ok(t, "offset fetch", r.Groups[0].ErrorCode)
					for _, rt := range r.Groups[0].Topics {
						for _, p := range rt.Partitions {
							offs = append(offs, p.Offset)
						}
					}
				}
				if !slices.Equal(offs, []int64{1}) {
					t.Errorf("committed offsets %v, want [1]", offs)
				}
			},
		},
		// StatesFilter (v4+) and TypesFilter (v5+) are empty: all groups.
		kmsg.ListGroups.Int16(): {
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.ListGroupsResponse)
				ok(t, "list groups", r.ErrorCode)
				if !slices.ContainsFunc(r.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == "commit-v0" }) {
					t.Errorf("groups listed lack commit-v0: %d groups", len(r.Groups))
				}
			},
		},
		// IncludeAuthorizedOperations (v3+) is false.
		kmsg.DescribeGroups.Int16(): {
			fill: func(_ *testing.T, _ int16, req kmsg.Request) {
				req.(*kmsg.DescribeGroupsRequest).Groups = []string{"join-v0"}
			},
			check: func(t *testing.T, _ int16, resp kmsg.Response) {
				r := resp.(*kmsg.DescribeGroupsResponse)
				if len(r.Groups) != 1 {
					t.Fatalf("answered %d groups, want 1", len(r.Groups))
				}
				g := r.Groups[0]
				ok(t, "describe group", g.ErrorCode)
				if len(g.Members) != 1 {
					t.Errorf("group join-v0: state %s, %d members, want the one that joined", g.State, len(g.Members))
				}
			},
		},
	}
}

// TestNode_MetadataAutoCreateByVersion asks for a missing topic at every
// Metadata version with AllowAutoTopicCreation left at its default: v0-v3
// lack the field and Kafka allows creation there; from v4 the default,
// false, refuses it.
func TestNode_MetadataAutoCreateByVersion(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AutoCreateTopics, cfg.DefaultPartitions = true, 1 })
	addr := c.cfgs[1].KafkaAddr
	for v := int16(0); v <= 12; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			name := fmt.Sprintf("auto-v%d", v)
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
			resp := rawKafka(t, addr, req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("answered %d topics, want 1", len(resp.Topics))
			}
			code := resp.Topics[0].ErrorCode
			created := c.nodes[1].meta.View().Topics[name] != nil
			if v < 4 {
				if !created || code == kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("v%d: %v, created %v; want the topic created (v0-v3 imply allow_auto_topic_creation)", v, kerr.ErrorForCode(code), created)
				}
				return
			}
			if created || code != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("v%d without allow_auto_topic_creation: %v, created %v; want UNKNOWN_TOPIC_OR_PARTITION and no topic", v, kerr.ErrorForCode(code), created)
			}
		})
	}
}
