package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// strangerCase fills a request naming resources a stranger holds no ACL
// for, and the code the answer must carry; nil is no authorization
// error at all (what the API shows is filtered, or it needs none).
type strangerCase struct {
	fill func(req kmsg.Request)
	want func(version int16) *kerr.Error
}

func always(code *kerr.Error) func(int16) *kerr.Error { return func(int16) *kerr.Error { return code } }

// TestAuthorizer_EveryAPIRefusesAStranger sends every routed API, named
// resources filled in, as a SASL user no ACL names, and checks the
// answer carries Kafka's authorization error for it. An API routed
// without a case here fails.
func TestAuthorizer_EveryAPIRefusesAStranger(t *testing.T) {
	ac := newACLCluster(t, 1)
	ctx := testCtx(t)
	admin := ac.saslClient("admin")
	createTopic(t, admin, "a", 1, 1)
	id := ac.nodes[1].meta.View().Topics["a"].ID
	alice := ac.saslClient("alice")
	b := alice.Broker(1)
	cases := strangerCases(id)
	for _, api := range ac.nodes[1].apis {
		name := kmsg.NameForKey(api.Key)
		tc, ok := cases[api.Key]
		if !ok {
			t.Errorf("%s is routed without a case here", name)
			continue
		}
		req := kmsg.RequestForKey(api.Key)
		if tc.fill != nil {
			tc.fill(req)
		}
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := tc.want(resp.GetVersion())
		codes := errorCodes(reflect.ValueOf(resp), nil)
		for _, c := range codes {
			if e := kerr.ErrorForCode(c); want == nil && isAuthzCode(c) {
				t.Errorf("%s v%d: %v, want no authorization error", name, resp.GetVersion(), e)
			}
		}
		if want != nil && !contains(codes, want.Code) {
			t.Errorf("%s v%d: codes %v, want %s", name, resp.GetVersion(), codes, want.Message)
		}
	}
}

func isAuthzCode(c int16) bool {
	switch c {
	case kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code:
		return true
	}
	return false
}

func contains(codes []int16, c int16) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// errorCodes collects every ErrorCode field in v, recursively.
func errorCodes(v reflect.Value, out []int16) []int16 {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out = errorCodes(v.Elem(), out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if v.Type().Field(i).Name == "ErrorCode" && f.Kind() == reflect.Int16 {
				out = append(out, int16(f.Int()))
				continue
			}
			out = errorCodes(f, out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			out = errorCodes(v.Index(i), out)
		}
	}
	return out
}

func strangerCases(id [16]byte) map[int16]strangerCase {
	topic := always(kerr.TopicAuthorizationFailed)
	group := always(kerr.GroupAuthorizationFailed)
	cluster := always(kerr.ClusterAuthorizationFailed)
	txn := always(kerr.TransactionalIDAuthorizationFailed)
	none := always(nil)
	return map[int16]strangerCase{
		kmsg.ApiVersions.Int16(): {want: none},
		kmsg.Metadata.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr("a")
			r.(*kmsg.MetadataRequest).Topics = []kmsg.MetadataRequestTopic{t}
		}, want: topic},
		kmsg.Produce.Int16(): {fill: func(r kmsg.Request) {
			p := r.(*kmsg.ProduceRequest)
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = "a", id
			t.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
			p.Acks, p.Topics = -1, []kmsg.ProduceRequestTopic{t}
		}, want: topic},
		kmsg.Fetch.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = "a", id
			t.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
			r.(*kmsg.FetchRequest).Topics = []kmsg.FetchRequestTopic{t}
		}, want: topic},
		kmsg.ListOffsets.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic, t.Partitions = "a", []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
			r.(*kmsg.ListOffsetsRequest).Topics = []kmsg.ListOffsetsRequestTopic{t}
		}, want: topic},
		kmsg.OffsetForLeaderEpoch.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic, t.Partitions = "a", []kmsg.OffsetForLeaderEpochRequestTopicPartition{kmsg.NewOffsetForLeaderEpochRequestTopicPartition()}
			r.(*kmsg.OffsetForLeaderEpochRequest).Topics = []kmsg.OffsetForLeaderEpochRequestTopic{t}
		}, want: topic},
		kmsg.InitProducerID.Int16(): {want: cluster},
		kmsg.CreateTopics.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic = "c"
			r.(*kmsg.CreateTopicsRequest).Topics = []kmsg.CreateTopicsRequestTopic{t}
		}, want: topic},
		kmsg.DeleteTopics.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr("a")
			d := r.(*kmsg.DeleteTopicsRequest)
			d.Topics, d.TopicNames = []kmsg.DeleteTopicsRequestTopic{t}, []string{"a"}
		}, want: topic},
		kmsg.CreatePartitions.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = "a", 2
			r.(*kmsg.CreatePartitionsRequest).Topics = []kmsg.CreatePartitionsRequestTopic{t}
		}, want: topic},
		kmsg.DescribeConfigs.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewDescribeConfigsRequestResource()
			t.ResourceType, t.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			b := kmsg.NewDescribeConfigsRequestResource()
			b.ResourceType, b.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			r.(*kmsg.DescribeConfigsRequest).Resources = []kmsg.DescribeConfigsRequestResource{t, b}
		}, want: topic},
		kmsg.AlterConfigs.Int16(): {fill: func(r kmsg.Request) {
			b := kmsg.NewAlterConfigsRequestResource()
			b.ResourceType, b.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			r.(*kmsg.AlterConfigsRequest).Resources = []kmsg.AlterConfigsRequestResource{b}
		}, want: cluster},
		kmsg.IncrementalAlterConfigs.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewIncrementalAlterConfigsRequestResource()
			t.ResourceType, t.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			r.(*kmsg.IncrementalAlterConfigsRequest).Resources = []kmsg.IncrementalAlterConfigsRequestResource{t}
		}, want: topic},
		kmsg.DescribeCluster.Int16(): {want: cluster},
		kmsg.DescribeLogDirs.Int16(): {want: cluster},
		kmsg.DeleteRecords.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewDeleteRecordsRequestTopic()
			t.Topic, t.Partitions = "a", []kmsg.DeleteRecordsRequestTopicPartition{kmsg.NewDeleteRecordsRequestTopicPartition()}
			r.(*kmsg.DeleteRecordsRequest).Topics = []kmsg.DeleteRecordsRequestTopic{t}
		}, want: topic},
		kmsg.DescribeTopicPartitions.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewDescribeTopicPartitionsRequestTopic()
			t.Topic = "a"
			r.(*kmsg.DescribeTopicPartitionsRequest).Topics = []kmsg.DescribeTopicPartitionsRequestTopic{t}
		}, want: topic},
		kmsg.AlterPartitionAssignments.Int16():  {want: cluster},
		kmsg.ListPartitionReassignments.Int16(): {want: cluster},
		kmsg.ElectLeaders.Int16():               {want: cluster},
		kmsg.WriteTxnMarkers.Int16(): {fill: func(r kmsg.Request) {
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "a", []int32{0}
			m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
			r.(*kmsg.WriteTxnMarkersRequest).Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
		}, want: cluster},
		kmsg.DescribeProducers.Int16(): {fill: func(r kmsg.Request) {
			t := kmsg.NewDescribeProducersRequestTopic()
			t.Topic, t.Partitions = "a", []int32{0}
			r.(*kmsg.DescribeProducersRequest).Topics = []kmsg.DescribeProducersRequestTopic{t}
		}, want: topic},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {want: cluster},
		kmsg.AlterUserSCRAMCredentials.Int16(): {fill: func(r kmsg.Request) {
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "alice", 1
			r.(*kmsg.AlterUserSCRAMCredentialsRequest).Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{d}
		}, want: cluster},
		kmsg.DescribeACLs.Int16(): {want: cluster},
		kmsg.CreateACLs.Int16(): {fill: func(r kmsg.Request) {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "a", "User:alice", "*"
			c.Operation, c.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			r.(*kmsg.CreateACLsRequest).Creations = []kmsg.CreateACLsRequestCreation{c}
		}, want: cluster},
		kmsg.DeleteACLs.Int16(): {fill: func(r kmsg.Request) {
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			r.(*kmsg.DeleteACLsRequest).Filters = []kmsg.DeleteACLsRequestFilter{f}
		}, want: cluster},
		kmsg.FindCoordinator.Int16(): {fill: func(r kmsg.Request) {
			f := r.(*kmsg.FindCoordinatorRequest)
			f.CoordinatorKey, f.CoordinatorKeys = "g", []string{"g"}
		}, want: group},
		kmsg.JoinGroup.Int16(): {fill: func(r kmsg.Request) {
			j := r.(*kmsg.JoinGroupRequest)
			j.Group, j.ProtocolType, j.SessionTimeoutMillis = "g", "consumer", 10000
		}, want: group},
		kmsg.SyncGroup.Int16():  {fill: func(r kmsg.Request) { r.(*kmsg.SyncGroupRequest).Group = "g" }, want: group},
		kmsg.Heartbeat.Int16():  {fill: func(r kmsg.Request) { r.(*kmsg.HeartbeatRequest).Group = "g" }, want: group},
		kmsg.LeaveGroup.Int16(): {fill: func(r kmsg.Request) { r.(*kmsg.LeaveGroupRequest).Group = "g" }, want: group},
		kmsg.OffsetCommit.Int16(): {fill: func(r kmsg.Request) {
			o := r.(*kmsg.OffsetCommitRequest)
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.Partitions = "a", []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
			o.Group, o.Topics = "g", []kmsg.OffsetCommitRequestTopic{t}
		}, want: group},
		kmsg.OffsetFetch.Int16(): {fill: func(r kmsg.Request) {
			o := r.(*kmsg.OffsetFetchRequest)
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			o.Group, o.Groups = "g", []kmsg.OffsetFetchRequestGroup{g}
		}, want: group},
		kmsg.OffsetDelete.Int16(): {fill: func(r kmsg.Request) { r.(*kmsg.OffsetDeleteRequest).Group = "g" }, want: group},
		kmsg.TxnOffsetCommit.Int16(): {fill: func(r kmsg.Request) {
			o := r.(*kmsg.TxnOffsetCommitRequest)
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.Partitions = "a", []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
			o.TransactionalID, o.Group, o.Topics = "t", "g", []kmsg.TxnOffsetCommitRequestTopic{t}
		}, want: txn},
		kmsg.ListGroups.Int16():     {want: none},
		kmsg.DescribeGroups.Int16(): {fill: func(r kmsg.Request) { r.(*kmsg.DescribeGroupsRequest).Groups = []string{"g"} }, want: group},
		kmsg.DeleteGroups.Int16():   {fill: func(r kmsg.Request) { r.(*kmsg.DeleteGroupsRequest).Groups = []string{"g"} }, want: group},
		kmsg.AddPartitionsToTxn.Int16(): {fill: func(r kmsg.Request) {
			a := r.(*kmsg.AddPartitionsToTxnRequest)
			a.TransactionalID = "t"
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID = "t"
			a.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
		}, want: func(v int16) *kerr.Error {
			if v >= 4 {
				return kerr.ClusterAuthorizationFailed
			}
			return kerr.TransactionalIDAuthorizationFailed
		}},
		kmsg.AddOffsetsToTxn.Int16(): {fill: func(r kmsg.Request) {
			a := r.(*kmsg.AddOffsetsToTxnRequest)
			a.TransactionalID, a.Group = "t", "g"
		}, want: txn},
		kmsg.EndTxn.Int16():               {fill: func(r kmsg.Request) { r.(*kmsg.EndTxnRequest).TransactionalID = "t" }, want: txn},
		kmsg.DescribeTransactions.Int16(): {fill: func(r kmsg.Request) { r.(*kmsg.DescribeTransactionsRequest).TransactionalIDs = []string{"t"} }, want: txn},
		kmsg.ListTransactions.Int16():     {want: none},
	}
}
