package auth

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// matchesResource: does the pattern of a cover the resource (typ, name)?
// A LITERAL pattern covers its own name, a LITERAL "*" every name of its
// type, a PREFIXED pattern every name it begins. It is the definition
// the index must agree with, checked one ACL at a time.
func (a ACL) matchesResource(typ kmsg.ACLResourceType, name string) bool {
	if a.ResourceType != typ {
		return false
	}
	if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, a.ResourceName)
	}
	return a.ResourceName == name || a.ResourceName == Wildcard
}

// linearAuthorize is Authorize by the rules read straight, over every
// ACL: the reference the index is tested against.
func linearAuthorize(z *Authorizer, acls []ACL, a Action) bool {
	if slices.Contains(z.SuperUsers, a.Principal) {
		return true
	}
	covered, allowed := false, false
	for _, acl := range acls {
		if !acl.matchesResource(a.ResourceType, a.ResourceName) {
			continue
		}
		covered = true
		if !acl.matchesWho(a.Principal, a.Host) {
			continue
		}
		switch acl.Permission {
		case kmsg.ACLPermissionTypeDeny:
			if acl.Operation == kmsg.ACLOperationAll || acl.Operation == a.Operation {
				return false
			}
		case kmsg.ACLPermissionTypeAllow:
			allowed = allowed || allows(acl.Operation, a.Operation)
		}
	}
	if !covered {
		return z.AllowEveryoneIfNoACLFound
	}
	return allowed
}

// randomACLs draws n ACLs over a few names, prefixes, principals, hosts
// and operations, so that they overlap often.
func randomACLs(r *rand.Rand, n int) []ACL {
	names := []string{"a", "ab", "abc", "b", "orders", "orders-eu", "*"}
	types := []kmsg.ACLResourceType{topic, group, kmsg.ACLResourceTypeTransactionalId}
	principals := []string{"User:alice", "User:bob", WildcardPrincipal}
	hosts := []string{"10.0.0.1", "10.0.0.2", Wildcard}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll, opRead, opWrite, opDesc, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	acls := make([]ACL, n)
	for i := range acls {
		pt := literal
		name := names[r.IntN(len(names))]
		if name != Wildcard && r.IntN(3) == 0 {
			pt = prefixed
		}
		perm := allow
		if r.IntN(4) == 0 {
			perm = deny
		}
		acls[i] = acl(types[r.IntN(len(types))], name, pt, perm, principals[r.IntN(len(principals))], hosts[r.IntN(len(hosts))], ops[r.IntN(len(ops))])
	}
	return acls
}

// TestACLIndex_AgreesWithTheRules: for random overlapping ACL sets and
// every action over the names they use (and some they do not), the
// index decides as the rules read straight do.
func TestACLIndex_AgreesWithTheRules(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "abcd", "b", "orders", "orders-eu", "orders-us", "x", ""}
	for round := range 300 {
		acls := randomACLs(r, r.IntN(12))
		x := IndexACLs(acls)
		for _, everyone := range []bool{false, true} {
			z := &Authorizer{AllowEveryoneIfNoACLFound: everyone}
			for _, typ := range []kmsg.ACLResourceType{topic, group, kmsg.ACLResourceTypeTransactionalId} {
				for _, name := range names {
					for _, op := range []kmsg.ACLOperation{opRead, opWrite, opDesc, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} {
						for _, who := range []string{"User:alice", "User:carol"} {
							a := act(who, "10.0.0.1", op, typ, name)
							if got, want := z.Authorize(x, a), linearAuthorize(z, acls, a); got != want {
								t.Fatalf("round %d, %+v, allow everyone %v, acls %v: index %v, rules %v", round, a, everyone, acls, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkAuthorize decides one produce's WRITE on a topic among n
// ACLs, most of them on other topics (literal and prefixed), as a
// cluster with many tenants has.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		acls := make([]ACL, 0, n)
		for i := range n {
			pt := literal
			if i%4 == 0 {
				pt = prefixed
			}
			acls = append(acls, acl(topic, fmt.Sprintf("tenant-%d-", i), pt, allow, fmt.Sprintf("User:u%d", i), Wildcard, opWrite))
		}
		acls = append(acls, acl(topic, "tenant-7-orders", literal, allow, "User:alice", Wildcard, opWrite))
		a := act("User:alice", "10.0.0.1", opWrite, topic, "tenant-7-orders")
		z := &Authorizer{}
		b.Run(fmt.Sprintf("acls=%d/index", n), func(b *testing.B) {
			x := IndexACLs(acls)
			for b.Loop() {
				if !z.Authorize(x, a) {
					b.Fatal("refused")
				}
			}
		})
		b.Run(fmt.Sprintf("acls=%d/scan", n), func(b *testing.B) {
			for b.Loop() {
				if !linearAuthorize(z, acls, a) {
					b.Fatal("refused")
				}
			}
		})
		b.Run(fmt.Sprintf("acls=%d/build", n), func(b *testing.B) {
			for b.Loop() {
				IndexACLs(acls)
			}
		})
	}
}
