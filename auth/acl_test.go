package auth

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	opRead   = kmsg.ACLOperationRead
	opWrite  = kmsg.ACLOperationWrite
	opDesc   = kmsg.ACLOperationDescribe
)

func acl(typ kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, perm kmsg.ACLPermissionType, principal, host string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceType: typ, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func act(principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) Action {
	return Action{Principal: principal, Host: host, Operation: op, ResourceType: typ, ResourceName: name}
}

// TestAuthorizer_Authorize mirrors Kafka's AuthorizerTest and
// StandardAuthorizerTest cases, each an allowed and a refused action.
func TestAuthorizer_Authorize(t *testing.T) {
	const alice, bob, host, other = "User:alice", "User:bob", "192.168.1.1", "192.168.1.2"
	for _, tc := range []struct {
		name  string
		acls  []ACL
		a     Action
		want  bool
		noACL bool // no acl covers the resource
	}{
		{"literal allow", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "a"), true, false},
		{"literal allow, other topic covered by no acl", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "b"), false, true},
		{"literal allow, other principal", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(bob, host, opRead, topic, "a"), false, false},
		{"literal allow, other operation", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opWrite, topic, "a"), false, false},
		{"literal allow, other resource type", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opRead, group, "a"), false, true},
		{"literal is not a prefix", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "ab"), false, true},
		{"deny overrides allow", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "a", literal, deny, alice, host, opRead),
		}, act(alice, host, opRead, topic, "a"), false, false},
		{"deny from another host does not apply", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "a", literal, deny, alice, other, opRead),
		}, act(alice, host, opRead, topic, "a"), true, false},
		{"deny of wildcard principal overrides allow", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "a", literal, deny, WildcardPrincipal, "*", opRead),
		}, act(alice, host, opRead, topic, "a"), false, false},
		{"deny ALL overrides allow READ", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "a", prefixed, deny, alice, "*", kmsg.ACLOperationAll),
		}, act(alice, host, opRead, topic, "a"), false, false},
		{"deny on a prefix overrides literal allow", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "", prefixed, deny, alice, "*", opRead),
		}, act(alice, host, opRead, topic, "a"), false, false},
		{"deny wildcard topic overrides allow", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "*", literal, deny, alice, "*", opRead),
		}, act(alice, host, opRead, topic, "a"), false, false},
		{"deny WRITE leaves READ", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opRead),
			acl(topic, "a", literal, deny, alice, "*", opWrite),
		}, act(alice, host, opRead, topic, "a"), true, false},
		{"deny READ does not deny the DESCRIBE that WRITE implies", []ACL{
			acl(topic, "a", literal, allow, alice, "*", opWrite),
			acl(topic, "a", literal, deny, alice, "*", opRead),
		}, act(alice, host, opDesc, topic, "a"), true, false},
		{"prefixed allow covers names it begins", []ACL{acl(topic, "foo", prefixed, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "foobar"), true, false},
		{"prefixed allow covers its own name", []ACL{acl(topic, "foo", prefixed, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "foo"), true, false},
		{"prefixed allow does not cover others", []ACL{acl(topic, "foo", prefixed, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "fo"), false, true},
		{"prefixed * is not a wildcard", []ACL{acl(topic, "*", prefixed, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "a"), false, true},
		{"wildcard topic", []ACL{acl(topic, "*", literal, allow, alice, "*", opRead)}, act(alice, host, opRead, topic, "anything"), true, false},
		{"wildcard principal", []ACL{acl(topic, "a", literal, allow, WildcardPrincipal, "*", opRead)}, act(bob, host, opRead, topic, "a"), true, false},
		{"User:* is every principal, of any type", []ACL{acl(topic, "a", literal, allow, WildcardPrincipal, "*", opRead)}, act("Group:g", host, opRead, topic, "a"), true, false},
		{"Group:* is no wildcard", []ACL{acl(topic, "a", literal, allow, "Group:*", "*", opRead)}, act("Group:g", host, opRead, topic, "a"), false, false},
		{"wildcard host", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, other, opRead, topic, "a"), true, false},
		{"named host", []ACL{acl(topic, "a", literal, allow, alice, host, opRead)}, act(alice, host, opRead, topic, "a"), true, false},
		{"named host refuses others", []ACL{acl(topic, "a", literal, allow, alice, host, opRead)}, act(alice, other, opRead, topic, "a"), false, false},
		{"ALL allows every operation", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationAll)}, act(alice, host, kmsg.ACLOperationDelete, topic, "a"), true, false},
		{"READ implies DESCRIBE", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, act(alice, host, opDesc, topic, "a"), true, false},
		{"WRITE implies DESCRIBE", []ACL{acl(topic, "a", literal, allow, alice, "*", opWrite)}, act(alice, host, opDesc, topic, "a"), true, false},
		{"DELETE implies DESCRIBE", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationDelete)}, act(alice, host, opDesc, topic, "a"), true, false},
		{"ALTER implies DESCRIBE", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationAlter)}, act(alice, host, opDesc, topic, "a"), true, false},
		{"CREATE does not imply DESCRIBE", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationCreate)}, act(alice, host, opDesc, topic, "a"), false, false},
		{"DESCRIBE does not imply READ", []ACL{acl(topic, "a", literal, allow, alice, "*", opDesc)}, act(alice, host, opRead, topic, "a"), false, false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationAlterConfigs)}, act(alice, host, kmsg.ACLOperationDescribeConfigs, topic, "a"), true, false},
		{"DESCRIBE_CONFIGS does not imply ALTER_CONFIGS", []ACL{acl(topic, "a", literal, allow, alice, "*", kmsg.ACLOperationDescribeConfigs)}, act(alice, host, kmsg.ACLOperationAlterConfigs, topic, "a"), false, false},
		{"an acl for someone else covers the resource", []ACL{acl(topic, "a", literal, allow, bob, "*", opRead)}, act(alice, host, opRead, topic, "a"), false, false},
		{"cluster", []ACL{acl(cluster, ClusterName, literal, allow, alice, "*", kmsg.ACLOperationClusterAction)}, act(alice, host, kmsg.ACLOperationClusterAction, cluster, ClusterName), true, false},
	} {
		for _, everyone := range []bool{false, true} {
			z := &Authorizer{AllowEveryoneIfNoACLFound: everyone}
			want := tc.want || (everyone && tc.noACL)
			if got := z.Authorize(IndexACLs(tc.acls), tc.a); got != want {
				t.Errorf("%s (allow everyone if no acl: %v): %v, want %v", tc.name, everyone, got, want)
			}
		}
	}
}

// TestAuthorizer_SuperUserAndNoACL: super users pass whatever denies
// them; a resource no ACL covers is decided by
// AllowEveryoneIfNoACLFound, one that any ACL covers is not.
func TestAuthorizer_SuperUserAndNoACL(t *testing.T) {
	denyAll := []ACL{acl(topic, "*", literal, deny, WildcardPrincipal, "*", kmsg.ACLOperationAll)}
	a := act("User:admin", "10.0.0.1", opWrite, topic, "a")
	if (&Authorizer{}).Authorize(IndexACLs(denyAll), a) {
		t.Fatal("a denied user was allowed")
	}
	if !(&Authorizer{SuperUsers: []string{"User:x", "User:admin"}}).Authorize(IndexACLs(denyAll), a) {
		t.Fatal("a super user was refused")
	}
	for _, everyone := range []bool{false, true} {
		z := &Authorizer{AllowEveryoneIfNoACLFound: everyone}
		if got := z.Authorize(IndexACLs(nil), a); got != everyone {
			t.Errorf("no acls, allow everyone %v: %v", everyone, got)
		}
		groupOnly := []ACL{acl(group, "*", literal, allow, WildcardPrincipal, "*", kmsg.ACLOperationAll)}
		if got := z.Authorize(IndexACLs(groupOnly), a); got != everyone {
			t.Errorf("acls on another type only, allow everyone %v: %v", everyone, got)
		}
		bobOnly := []ACL{acl(topic, "a", literal, allow, "User:bob", "*", opWrite)}
		if z.Authorize(IndexACLs(bobOnly), a) {
			t.Errorf("allow everyone %v: an acl for bob let admin in", everyone)
		}
	}
}

// TestAuthorizer_AllowedAny: an ALLOW on some topic counts unless a DENY
// covers all that the ALLOW does.
func TestAuthorizer_AllowedAny(t *testing.T) {
	const alice = "User:alice"
	a := act(alice, "h", opWrite, topic, "")
	z := &Authorizer{}
	for _, tc := range []struct {
		name string
		acls []ACL
		want bool
	}{
		{"none", nil, false},
		{"literal", []ACL{acl(topic, "a", literal, allow, alice, "*", opWrite)}, true},
		{"prefixed", []ACL{acl(topic, "p", prefixed, allow, alice, "*", opWrite)}, true},
		{"read only", []ACL{acl(topic, "a", literal, allow, alice, "*", opRead)}, false},
		{"denied by the same literal", []ACL{acl(topic, "a", literal, allow, alice, "*", opWrite), acl(topic, "a", literal, deny, alice, "*", opWrite)}, false},
		{"denied by a wildcard", []ACL{acl(topic, "p", prefixed, allow, alice, "*", opWrite), acl(topic, "*", literal, deny, alice, "*", opWrite)}, false},
		{"a literal deny does not cover a prefix", []ACL{acl(topic, "p", prefixed, allow, alice, "*", opWrite), acl(topic, "p", literal, deny, alice, "*", opWrite)}, true},
	} {
		if got := z.AllowedAny(IndexACLs(tc.acls), a); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	everyone := &Authorizer{AllowEveryoneIfNoACLFound: true}
	if !everyone.AllowedAny(IndexACLs([]ACL{acl(topic, "a", literal, allow, "User:bob", "*", opWrite)}), a) {
		t.Error("allow everyone: acls on a alone leave other topics open")
	}
	if everyone.AllowedAny(IndexACLs([]ACL{acl(topic, "*", literal, deny, alice, "*", opWrite)}), a) {
		t.Error("allow everyone: a wildcard deny was passed")
	}
	if !(&Authorizer{SuperUsers: []string{alice}}).AllowedAny(IndexACLs(nil), a) {
		t.Error("a super user was refused")
	}
}

// TestACL_Check: what Kafka refuses to store is refused with
// ErrInvalidACL.
func TestACL_Check(t *testing.T) {
	good := acl(topic, "a", literal, allow, "User:alice", "*", opRead)
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*ACL){
		"resource any":       func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeAny },
		"resource unknown":   func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeUnknown },
		"delegation token":   func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeDelegationToken },
		"user":               func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeUser },
		"pattern match":      func(a *ACL) { a.PatternType = kmsg.ACLResourcePatternTypeMatch },
		"pattern any":        func(a *ACL) { a.PatternType = kmsg.ACLResourcePatternTypeAny },
		"empty name":         func(a *ACL) { a.ResourceName = "" },
		"cluster named":      func(a *ACL) { a.ResourceType, a.ResourceName = cluster, "c" },
		"cluster prefixed":   func(a *ACL) { a.ResourceType, a.ResourceName, a.PatternType = cluster, ClusterName, prefixed },
		"principal no type":  func(a *ACL) { a.Principal = "alice" },
		"principal no name":  func(a *ACL) { a.Principal = "User:" },
		"empty host":         func(a *ACL) { a.Host = "" },
		"operation any":      func(a *ACL) { a.Operation = kmsg.ACLOperationAny },
		"operation unknown":  func(a *ACL) { a.Operation = 0 },
		"operation tokens":   func(a *ACL) { a.Operation = kmsg.ACLOperationCreateTokens },
		"permission any":     func(a *ACL) { a.Permission = kmsg.ACLPermissionTypeAny },
		"permission unknown": func(a *ACL) { a.Permission = 0 },
	} {
		a := good
		mod(&a)
		if err := a.Check(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestACLFilter_Matches: Kafka's filter semantics for describe and
// delete: nil and ANY match all, a named LITERAL or PREFIXED filter its
// own pattern only, MATCH every pattern that applies to the name.
func TestACLFilter_Matches(t *testing.T) {
	acls := []ACL{
		acl(topic, "foo", literal, allow, "User:alice", "*", opRead),
		acl(topic, "*", literal, allow, "User:bob", "h1", opWrite),
		acl(topic, "fo", prefixed, deny, "User:alice", "*", opWrite),
		acl(topic, "bar", prefixed, allow, "User:alice", "*", opRead),
		acl(group, "foo", literal, allow, "User:alice", "*", opRead),
	}
	str := func(s string) *string { return &s }
	anyF := ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	for _, tc := range []struct {
		name string
		mod  func(*ACLFilter)
		want []int
	}{
		{"everything", func(*ACLFilter) {}, []int{0, 1, 2, 3, 4}},
		{"topics", func(f *ACLFilter) { f.ResourceType = topic }, []int{0, 1, 2, 3}},
		{"any pattern named foo", func(f *ACLFilter) { f.ResourceName = str("foo") }, []int{0, 4}},
		{"literal", func(f *ACLFilter) { f.PatternType = literal }, []int{0, 1, 4}},
		{"prefixed named fo", func(f *ACLFilter) { f.PatternType, f.ResourceName = prefixed, str("fo") }, []int{2}},
		{"literal named fo", func(f *ACLFilter) { f.PatternType, f.ResourceName = literal, str("fo") }, nil},
		{"match topic foo", func(f *ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = topic, kmsg.ACLResourcePatternTypeMatch, str("foo")
		}, []int{0, 1, 2}},
		{"match without name", func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }, []int{0, 1, 2, 3, 4}},
		{"principal", func(f *ACLFilter) { f.Principal = str("User:bob") }, []int{1}},
		{"host", func(f *ACLFilter) { f.Host = str("h1") }, []int{1}},
		{"operation", func(f *ACLFilter) { f.Operation = opWrite }, []int{1, 2}},
		{"permission", func(f *ACLFilter) { f.Permission = deny }, []int{2}},
	} {
		f := anyF
		tc.mod(&f)
		if err := f.Check(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []int
		for i, a := range acls {
			if f.Matches(a) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
		}
		if n := len(f.Select(acls)); n != len(tc.want) {
			t.Errorf("%s: selected %d", tc.name, n)
		}
	}
	for name, mod := range map[string]func(*ACLFilter){
		"unknown resource": func(f *ACLFilter) { f.ResourceType = 0 },
		"unknown pattern":  func(f *ACLFilter) { f.PatternType = 0 },
		"unknown op":       func(f *ACLFilter) { f.Operation = 0 },
		"unknown perm":     func(f *ACLFilter) { f.Permission = 0 },
	} {
		f := anyF
		mod(&f)
		if err := f.Check(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
