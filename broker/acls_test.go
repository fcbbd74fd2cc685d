package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// TestACLAPIs_BadInput: a super user's malformed creations and filters
// are answered INVALID_REQUEST with the reason, one entry at a time, and
// change nothing; the valid entries beside them are served.
func TestACLAPIs_BadInput(t *testing.T) {
	ac := newACLCluster(t, 1)
	ctx := testCtx(t)
	admin := ac.saslClient("admin")
	creation := func(mod func(*kmsg.CreateACLsRequestCreation)) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "a", "User:alice", "*"
		c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		if mod != nil {
			mod(&c)
		}
		return c
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "alice" }),
		creation(func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.ResourceName = kmsg.ACLResourceTypeCluster, "other"
		}),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeDelegationToken }),
		creation(nil),
	}
	resp, err := admin.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"principalType:principalName", "kafka-cluster", "pattern type", "not supported", ""} {
		r := resp.(*kmsg.CreateACLsResponse).Results[i]
		if want == "" {
			if r.ErrorCode != 0 {
				t.Errorf("creation %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
			}
			continue
		}
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, want) {
			t.Errorf("creation %d: %v %v, want INVALID_REQUEST naming %q", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, want)
		}
	}
	if got := ac.nodes[1].meta.View().ACLs; len(got) != 1 {
		t.Fatalf("%d acls held, want the one valid creation", len(got))
	}

	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType = kmsg.ACLResourceTypeUnknown
	if resp, err := admin.Request(ctx, desc); err != nil || resp.(*kmsg.DescribeACLsResponse).ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describe with an UNKNOWN type: %v %+v", err, resp)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	bad := kmsg.NewDeleteACLsRequestFilter()
	bad.Operation = kmsg.ACLOperationUnknown
	good := kmsg.NewDeleteACLsRequestFilter()
	good.ResourceType, good.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	good.Operation, good.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{bad, good}
	dresp, err := admin.Request(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	rs := dresp.(*kmsg.DeleteACLsResponse).Results
	if len(rs) != 2 || rs[0].ErrorCode != kerr.InvalidRequest.Code || rs[1].ErrorCode != 0 || len(rs[1].MatchingACLs) != 1 {
		t.Errorf("delete: %+v", rs)
	}
	if got := ac.nodes[1].meta.View().ACLs; len(got) != 0 {
		t.Errorf("%d acls left, want none", len(got))
	}

	// A broker whose binary predates ACLs: no change is proposed.
	ac.propose(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: 9, KafkaAddr: "127.0.0.1:1"}})
	eventually(t, "broker 9 registered", func() bool { return ac.nodes[1].meta.View().Brokers[9] != nil })
	req.Creations = []kmsg.CreateACLsRequestCreation{creation(nil)}
	resp, err = admin.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.CreateACLsResponse).Results[0]; r.ErrorCode != kerr.UnsupportedVersion.Code || !strings.Contains(*r.ErrorMessage, "broker 9") {
		t.Errorf("create beside a broker without ACLs: %v %v, want UNSUPPORTED_VERSION naming broker 9", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if got := ac.nodes[1].meta.View().ACLs; len(got) != 0 {
		t.Errorf("%d acls held, want none", len(got))
	}
}
