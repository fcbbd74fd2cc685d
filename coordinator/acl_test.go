package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/auth"
)

func topicACL(name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) auth.ACL {
	return auth.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: pt,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func anyACLFilter() auth.ACLFilter {
	return auth.ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
}

// TestACLs_CreateDelete: creation adds each ACL once; deletion removes
// what any filter matches and answers, per filter, what it matched; bad
// input is refused with INVALID_REQUEST and changes nothing; the ACLs
// survive a snapshot.
func TestACLs_CreateDelete(t *testing.T) {
	m := NewMetadata()
	a := topicACL("a", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead)
	p := topicACL("p", kmsg.ACLResourcePatternTypePrefixed, "User:alice", kmsg.ACLOperationWrite)
	b := topicACL("b", kmsg.ACLResourcePatternTypeLiteral, "User:bob", kmsg.ACLOperationAll)
	applyChecked(t, m, &Command{CreateACLs: &CreateACLs{ACLs: []auth.ACL{a, p}}})
	applyChecked(t, m, &Command{CreateACLs: &CreateACLs{ACLs: []auth.ACL{a, b}}})
	if got := m.View().ACLs; len(got) != 3 || got[0] != a || got[1] != p || got[2] != b {
		t.Fatalf("acls %v", got)
	}
	before := m.View()
	bad := a
	bad.PatternType = kmsg.ACLResourcePatternTypeMatch
	badFilter := anyACLFilter()
	badFilter.Operation = kmsg.ACLOperationUnknown
	for name, c := range map[string]*Command{
		"match pattern":    {CreateACLs: &CreateACLs{ACLs: []auth.ACL{b, bad}}},
		"no acls":          {CreateACLs: &CreateACLs{}},
		"unknown op":       {DeleteACLs: &DeleteACLs{Filters: []auth.ACLFilter{anyACLFilter(), badFilter}}},
		"no filters":       {DeleteACLs: &DeleteACLs{}},
		"principal format": {CreateACLs: &CreateACLs{ACLs: []auth.ACL{topicACL("x", kmsg.ACLResourcePatternTypeLiteral, "alice", kmsg.ACLOperationRead)}}},
	} {
		var ce *Error
		if err := m.Try(c).Err; !errors.As(err, &ce) || ce.Code != kerr.InvalidRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
	if m.View() != before {
		t.Fatal("a refused command changed the state")
	}
	alice, bob := "User:alice", "User:bob"
	byAlice, byBob := anyACLFilter(), anyACLFilter()
	byAlice.Principal, byBob.Principal = &alice, &bob
	byAlice.PatternType = kmsg.ACLResourcePatternTypeLiteral
	r := applyChecked(t, m, &Command{DeleteACLs: &DeleteACLs{Filters: []auth.ACLFilter{byAlice, byAlice, byBob}}})
	if len(r.ACLs) != 3 || len(r.ACLs[0]) != 1 || r.ACLs[0][0] != a || len(r.ACLs[1]) != 1 || len(r.ACLs[2]) != 1 || r.ACLs[2][0] != b {
		t.Fatalf("matched %v", r.ACLs)
	}
	if got := m.View().ACLs; len(got) != 1 || got[0] != p {
		t.Fatalf("after delete: %v", got)
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored := NewMetadata()
	if err := restored.Restore(&raftpb.Snapshot{Data: snap}); err != nil {
		t.Fatal(err)
	}
	if got := restored.View().ACLs; len(got) != 1 || got[0] != p {
		t.Fatalf("after a snapshot: %v", got)
	}
	r = applyChecked(t, m, &Command{DeleteACLs: &DeleteACLs{Filters: []auth.ACLFilter{anyACLFilter()}}})
	if len(r.ACLs[0]) != 1 || m.View().ACLs != nil {
		t.Fatalf("delete all: matched %v, left %v", r.ACLs, m.View().ACLs)
	}
}

// TestACLs_JSON: ACL commands are logged with Kafka's names for the
// enums, and decode back to the same command.
func TestACLs_JSON(t *testing.T) {
	name := "t"
	cmd := &Command{CreateACLs: &CreateACLs{ACLs: []auth.ACL{topicACL("t", kmsg.ACLResourcePatternTypePrefixed, "User:alice", kmsg.ACLOperationDescribeConfigs)}}}
	f := anyACLFilter()
	f.ResourceName = &name
	del := &Command{DeleteACLs: &DeleteACLs{Filters: []auth.ACLFilter{f}}}
	for _, c := range []*Command{cmd, del} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"resource_type":"`, `"pattern_type":"`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %s", b, want)
			}
		}
		back, err := DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := back.Encode(); string(again) != string(b) {
			t.Errorf("round trip: %s, want %s", again, b)
		}
	}
	b, _ := cmd.Encode()
	if want := `"pattern_type":"PREFIXED","principal":"User:alice","host":"*","operation":"DESCRIBE_CONFIGS"`; !strings.Contains(string(b), want) {
		t.Errorf("%s lacks %s", b, want)
	}
}
