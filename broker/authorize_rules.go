package broker

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// authzRule is how one API is authorized, in the order the parts run:
// whole decides the request as a whole (nil allows; a code answers every
// entry of the request with it); item decides each entry of the first
// non-empty request list named in lists, refused entries being answered
// with their code and removed before the handler sees the request;
// after edits the handler's response (hiding what a list-all request may
// not see); ops fills KIP-430's authorized operations, and runs with the
// authorizer off too (answering every supported operation). inHandler
// marks an API whose handler authorizes itself (the file is named in the
// table); open one that needs nothing.
type authzRule struct {
	whole     func(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error
	lists     []string
	item      itemJudge
	after     func(n *Node, c *kafka.Conn, key int16, req kmsg.Request, resp kmsg.Response)
	ops       func(n *Node, c *kafka.Conn, key int16, req kmsg.Request, resp kmsg.Response)
	inHandler bool
	open      bool
}

// authzRules is the decision of every API raftq routes, after Kafka's
// KafkaApis; a routed API missing here fails TestAuthzRules_EveryRoute.
var authzRules = map[int16]authzRule{
	kmsg.ApiVersions.Int16(): {open: true},
	kmsg.Metadata.Int16():    {inHandler: true}, // metadata_authz.go
	kmsg.Produce.Int16():     {whole: txnIDWhole(kmsg.ACLOperationWrite), lists: topicLists, item: topicItem(kmsg.ACLOperationWrite)},
	kmsg.Fetch.Int16():       {lists: topicLists, item: topicItem(kmsg.ACLOperationRead)},

	kmsg.ListOffsets.Int16():             {lists: topicLists, item: topicItem(kmsg.ACLOperationDescribe)},
	kmsg.OffsetForLeaderEpoch.Int16():    {lists: topicLists, item: topicItem(kmsg.ACLOperationDescribe)},
	kmsg.DeleteRecords.Int16():           {lists: topicLists, item: topicItem(kmsg.ACLOperationDelete)},
	kmsg.DescribeProducers.Int16():       {lists: topicLists, item: topicItem(kmsg.ACLOperationRead)},
	kmsg.DescribeTopicPartitions.Int16(): {lists: topicLists, item: topicItem(kmsg.ACLOperationDescribe), after: hideTopics},

	kmsg.CreateTopics.Int16():            {lists: topicLists, item: createTopicItem, after: createTopicsConfigs},
	kmsg.DeleteTopics.Int16():            {lists: topicLists, item: topicItem(kmsg.ACLOperationDelete)},
	kmsg.CreatePartitions.Int16():        {lists: topicLists, item: topicItem(kmsg.ACLOperationAlter)},
	kmsg.DescribeConfigs.Int16():         {lists: resourceLists, item: configItem(kmsg.ACLOperationDescribeConfigs)},
	kmsg.AlterConfigs.Int16():            {lists: resourceLists, item: configItem(kmsg.ACLOperationAlterConfigs)},
	kmsg.IncrementalAlterConfigs.Int16(): {lists: resourceLists, item: configItem(kmsg.ACLOperationAlterConfigs)},

	kmsg.DescribeCluster.Int16():              {whole: clusterWhole(kmsg.ACLOperationDescribe), ops: describeClusterOps},
	kmsg.DescribeLogDirs.Int16():              {whole: clusterWhole(kmsg.ACLOperationDescribe)},
	kmsg.AlterPartitionAssignments.Int16():    {whole: clusterWhole(kmsg.ACLOperationAlter)},
	kmsg.ListPartitionReassignments.Int16():   {whole: clusterWhole(kmsg.ACLOperationDescribe)},
	kmsg.ElectLeaders.Int16():                 {whole: clusterWhole(kmsg.ACLOperationAlter)},
	kmsg.WriteTxnMarkers.Int16():              {whole: clusterWhole(kmsg.ACLOperationClusterAction)},
	kmsg.DescribeUserSCRAMCredentials.Int16(): {whole: clusterWhole(kmsg.ACLOperationDescribe)},
	kmsg.AlterUserSCRAMCredentials.Int16():    {inHandler: true}, // scram_users.go: per user
	kmsg.CreateACLs.Int16():                   {inHandler: true}, // acls.go: SECURITY_DISABLED first
	kmsg.DescribeACLs.Int16():                 {inHandler: true},
	kmsg.DeleteACLs.Int16():                   {inHandler: true},

	kmsg.FindCoordinator.Int16(): {whole: findCoordinatorWhole, lists: []string{"CoordinatorKeys"}, item: coordinatorKeyItem},
	kmsg.JoinGroup.Int16():       {whole: groupWhole(kmsg.ACLOperationRead)},
	kmsg.SyncGroup.Int16():       {whole: groupWhole(kmsg.ACLOperationRead)},
	kmsg.Heartbeat.Int16():       {whole: groupWhole(kmsg.ACLOperationRead)},
	kmsg.LeaveGroup.Int16():      {whole: groupWhole(kmsg.ACLOperationRead)},
	kmsg.OffsetCommit.Int16():    {whole: groupWhole(kmsg.ACLOperationRead), lists: topicLists, item: topicItem(kmsg.ACLOperationRead)},
	kmsg.OffsetFetch.Int16():     {whole: groupWhole(kmsg.ACLOperationDescribe), lists: []string{"Groups"}, item: groupItem(kmsg.ACLOperationDescribe), after: offsetFetchTopics},
	kmsg.OffsetDelete.Int16():    {whole: groupWhole(kmsg.ACLOperationDelete), lists: topicLists, item: topicItem(kmsg.ACLOperationRead)},
	kmsg.TxnOffsetCommit.Int16(): {whole: all(txnIDWhole(kmsg.ACLOperationWrite), groupWhole(kmsg.ACLOperationRead)), lists: topicLists, item: topicItem(kmsg.ACLOperationRead)},
	kmsg.ListGroups.Int16():      {after: hideGroups},
	kmsg.DescribeGroups.Int16():  {lists: []string{"Groups"}, item: groupItem(kmsg.ACLOperationDescribe), ops: describeGroupsOps},
	kmsg.DeleteGroups.Int16():    {lists: []string{"Groups"}, item: groupItem(kmsg.ACLOperationDelete)},

	kmsg.InitProducerID.Int16():       {whole: initProducerIDWhole},
	kmsg.AddPartitionsToTxn.Int16():   {whole: addPartitionsWhole, lists: topicLists, item: topicItem(kmsg.ACLOperationWrite)},
	kmsg.AddOffsetsToTxn.Int16():      {whole: all(txnIDWhole(kmsg.ACLOperationWrite), groupWhole(kmsg.ACLOperationRead))},
	kmsg.EndTxn.Int16():               {whole: txnIDWhole(kmsg.ACLOperationWrite)},
	kmsg.DescribeTransactions.Int16(): {inHandler: true}, // txn_describe.go: per id
	kmsg.ListTransactions.Int16():     {after: hideTransactions},
}

var (
	topicLists    = []string{"Topics", "TopicNames"}
	resourceLists = []string{"Resources"}
)

// authorized wraps fn in key's rule; with the authorizer off (fixed for
// the node's life) it is fn, or fn and its KIP-430 operations.
func (n *Node) authorized(key int16, fn kafka.ServeFunc) kafka.ServeFunc {
	r, ok := authzRules[key]
	switch {
	case !ok || r.open || (r.inHandler || !n.cfg.Authorizer) && r.ops == nil:
		return fn // TestAuthzRules_EveryRoute holds every key to a rule
	case !n.cfg.Authorizer:
		return func(c *kafka.Conn, req *kafka.Request) kafka.Pending {
			return &authzPending{p: fn(c, req), after: func(resp kmsg.Response) { r.ops(n, c, key, req.Body, resp) }}
		}
	}
	return func(c *kafka.Conn, req *kafka.Request) kafka.Pending {
		return n.serveAuthorized(r, key, fn, c, req)
	}
}

func (n *Node) serveAuthorized(r authzRule, key int16, fn kafka.ServeFunc, c *kafka.Conn, req *kafka.Request) kafka.Pending {
	if r.whole != nil {
		if code := r.whole(n, c, key, req.Body); code != nil {
			return refuseWhole(req.Body, code)
		}
	}
	var denied map[*kerr.Error]kmsg.Request
	if r.item != nil {
		allowed, d, nAllowed, ok := splitItems(n, c, key, req.Body, r.lists, r.item)
		if ok && len(d) > 0 {
			if nAllowed == 0 {
				return kafka.Ready(noResponseIfAcks0(req.Body, deniedResponse(req.Body.ResponseKind(), d)))
			}
			cp := *req
			cp.Body, denied = allowed, d
			req = &cp
		}
	}
	p := fn(c, req)
	if len(denied) == 0 && r.after == nil && r.ops == nil {
		return p
	}
	return &authzPending{p: p, denied: denied, after: func(resp kmsg.Response) {
		if r.after != nil {
			r.after(n, c, key, req.Body, resp)
		}
		if r.ops != nil {
			r.ops(n, c, key, req.Body, resp)
		}
	}}
}

// refuseWhole answers req with code everywhere its response can carry
// it. A response with no place for it (DescribeLogDirs before v3, an
// ElectLeaders v0 of every partition) is answered empty, as Kafka
// answers an unauthorized DescribeLogDirs.
func refuseWhole(req kmsg.Request, code *kerr.Error) kafka.Pending {
	resp, ok := kafka.ErrorResponse(req, code.Code)
	if !ok {
		resp = req.ResponseKind()
	}
	return kafka.Ready(noResponseIfAcks0(req, resp))
}

// noResponseIfAcks0 is nil for a Produce with acks=0, which is never
// answered.
func noResponseIfAcks0(req kmsg.Request, resp kmsg.Response) kmsg.Response {
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		return nil
	}
	return resp
}

// authzPending is the handler's answer with the refused entries'
// answers appended and the rule's after applied.
type authzPending struct {
	p      kafka.Pending
	denied map[*kerr.Error]kmsg.Request
	after  func(kmsg.Response)
}

func (a *authzPending) Done() <-chan struct{} { return a.p.Done() }

func (a *authzPending) Result() (kmsg.Response, error) {
	resp, err := a.p.Result()
	if err != nil || resp == nil {
		return resp, err
	}
	a.after(resp)
	return deniedResponse(resp, a.denied), nil
}

func all(rules ...func(*Node, *kafka.Conn, int16, kmsg.Request) *kerr.Error) func(*Node, *kafka.Conn, int16, kmsg.Request) *kerr.Error {
	return func(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
		for _, r := range rules {
			if code := r(n, c, key, req); code != nil {
				return code
			}
		}
		return nil
	}
}

func clusterWhole(op kmsg.ACLOperation) func(*Node, *kafka.Conn, int16, kmsg.Request) *kerr.Error {
	return func(n *Node, c *kafka.Conn, key int16, _ kmsg.Request) *kerr.Error {
		if n.allowedCluster(c, key, op) {
			return nil
		}
		return kerr.ClusterAuthorizationFailed
	}
}

// groupWhole checks op on the request's Group (OffsetFetch before v8,
// JoinGroup, ...); a request without one (OffsetFetch v8+) passes to
// its items.
func groupWhole(op kmsg.ACLOperation) func(*Node, *kafka.Conn, int16, kmsg.Request) *kerr.Error {
	return func(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
		v := reflect.ValueOf(req).Elem()
		if v.FieldByName("Group").IsValid() && isFieldSetAtVersion(req, "Group") {
			if !n.allowed(c, key, op, kmsg.ACLResourceTypeGroup, stringField(v, "Group")) {
				return kerr.GroupAuthorizationFailed
			}
		}
		return nil
	}
}

// isFieldSetAtVersion: OffsetFetch v8+ carries groups in a list and its
// top-level Group is not on the wire.
func isFieldSetAtVersion(req kmsg.Request, field string) bool {
	if of, ok := req.(*kmsg.OffsetFetchRequest); ok && field == "Group" {
		return of.Version < 8
	}
	return true
}

// txnIDWhole checks op on the request's transactional id, when it has
// one (a Produce of an idempotent or plain producer has none).
func txnIDWhole(op kmsg.ACLOperation) func(*Node, *kafka.Conn, int16, kmsg.Request) *kerr.Error {
	return func(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
		id := stringField(reflect.ValueOf(req).Elem(), "TransactionalID")
		if id == "" || n.allowed(c, key, op, kmsg.ACLResourceTypeTransactionalId, id) {
			return nil
		}
		return kerr.TransactionalIDAuthorizationFailed
	}
}

func topicItem(op kmsg.ACLOperation) itemJudge {
	return func(n *Node, c *kafka.Conn, key int16, _ kmsg.Request, it reflect.Value) *kerr.Error {
		name := itemName(n, it)
		if name == "" || n.allowed(c, key, op, kmsg.ACLResourceTypeTopic, name) {
			return nil // an unknown topic id is the handler's to answer
		}
		return kerr.TopicAuthorizationFailed
	}
}

func groupItem(op kmsg.ACLOperation) itemJudge {
	return func(n *Node, c *kafka.Conn, key int16, _ kmsg.Request, it reflect.Value) *kerr.Error {
		if n.allowed(c, key, op, kmsg.ACLResourceTypeGroup, itemName(n, it)) {
			return nil
		}
		return kerr.GroupAuthorizationFailed
	}
}

// createTopicItem: CREATE on the cluster, or else on the topic.
func createTopicItem(n *Node, c *kafka.Conn, key int16, _ kmsg.Request, it reflect.Value) *kerr.Error {
	if n.allowedQuiet(c, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, clusterResource) ||
		n.allowed(c, key, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, itemName(n, it)) {
		return nil
	}
	return kerr.TopicAuthorizationFailed
}

// configItem checks op on a config resource: a topic, or a broker or
// broker logger (the cluster, as Kafka).
func configItem(op kmsg.ACLOperation) itemJudge {
	return func(n *Node, c *kafka.Conn, key int16, _ kmsg.Request, it reflect.Value) *kerr.Error {
		if kmsg.ConfigResourceType(it.FieldByName("ResourceType").Int()) == kmsg.ConfigResourceTypeTopic {
			if n.allowed(c, key, op, kmsg.ACLResourceTypeTopic, stringField(it, "ResourceName")) {
				return nil
			}
			return kerr.TopicAuthorizationFailed
		}
		if n.allowedCluster(c, key, op) {
			return nil
		}
		return kerr.ClusterAuthorizationFailed
	}
}

// findCoordinatorWhole checks a single-key FindCoordinator (before v4).
func findCoordinatorWhole(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
	r := req.(*kmsg.FindCoordinatorRequest)
	if r.Version >= 4 {
		return nil
	}
	return coordinatorKey(n, c, key, r.CoordinatorType, r.CoordinatorKey)
}

func coordinatorKeyItem(n *Node, c *kafka.Conn, key int16, req kmsg.Request, it reflect.Value) *kerr.Error {
	return coordinatorKey(n, c, key, req.(*kmsg.FindCoordinatorRequest).CoordinatorType, it.String())
}

// coordinatorKey: DESCRIBE on the group (type 0) or transactional id
// (type 1) whose coordinator is asked for.
func coordinatorKey(n *Node, c *kafka.Conn, key int16, typ int8, name string) *kerr.Error {
	if typ == 1 {
		if n.allowed(c, key, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, name) {
			return nil
		}
		return kerr.TransactionalIDAuthorizationFailed
	}
	if n.allowed(c, key, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, name) {
		return nil
	}
	return kerr.GroupAuthorizationFailed
}

// initProducerIDWhole: a transactional producer needs WRITE on its id;
// an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some
// topic (Kafka's authorizeByResourceType).
func initProducerIDWhole(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID != nil && *r.TransactionalID != "" {
		return txnIDWhole(kmsg.ACLOperationWrite)(n, c, key, req)
	}
	if n.allowedAny(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) ||
		n.allowedCluster(c, key, kmsg.ACLOperationIdempotentWrite) {
		return nil
	}
	return kerr.ClusterAuthorizationFailed
}

// addPartitionsWhole: v4+ batches come from brokers verifying
// (KIP-890) and need CLUSTER_ACTION; a client's (before v4) needs WRITE
// on its transactional id, and its topics WRITE each.
func addPartitionsWhole(n *Node, c *kafka.Conn, key int16, req kmsg.Request) *kerr.Error {
	if req.GetVersion() >= 4 {
		return clusterWhole(kmsg.ACLOperationClusterAction)(n, c, key, req)
	}
	return txnIDWhole(kmsg.ACLOperationWrite)(n, c, key, req)
}
