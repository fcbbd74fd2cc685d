package auth

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLIndex is a set of ACLs arranged for Authorize: by resource type,
// then literal name, the wildcard, and prefixes by length, so that an
// action looks at the ACLs that cover its resource and no others, as
// Kafka's StandardAuthorizer does with its sorted set. An action on a
// name of length L costs one map lookup for the literal name and one
// per distinct prefix length up to L, whatever the number of ACLs.
//
// An ACLIndex is immutable once built; a nil one holds no ACLs.
type ACLIndex struct {
	byType map[kmsg.ACLResourceType]*typeACLs
}

// typeACLs are the ACLs of one resource type.
type typeACLs struct {
	all        []ACL // in the order given, for AllowedAny
	literal    map[string][]ACL
	wildcard   []ACL            // LITERAL "*"
	prefixed   map[string][]ACL // by prefix
	prefixLens []int            // the distinct lengths of prefixed's keys, ascending
}

// IndexACLs indexes acls (which it does not keep a reference to).
func IndexACLs(acls []ACL) *ACLIndex {
	x := &ACLIndex{byType: map[kmsg.ACLResourceType]*typeACLs{}}
	for _, a := range acls {
		t := x.byType[a.ResourceType]
		if t == nil {
			t = &typeACLs{literal: map[string][]ACL{}, prefixed: map[string][]ACL{}}
			x.byType[a.ResourceType] = t
		}
		t.all = append(t.all, a)
		switch {
		case a.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			if _, ok := t.prefixed[a.ResourceName]; !ok {
				t.prefixLens = append(t.prefixLens, len(a.ResourceName))
			}
			t.prefixed[a.ResourceName] = append(t.prefixed[a.ResourceName], a)
		case a.ResourceName == Wildcard:
			t.wildcard = append(t.wildcard, a)
		default:
			t.literal[a.ResourceName] = append(t.literal[a.ResourceName], a)
		}
	}
	for _, t := range x.byType {
		slices.Sort(t.prefixLens)
		t.prefixLens = slices.Compact(t.prefixLens)
	}
	return x
}

// ofType is the ACLs of resource type typ, nil for none.
func (x *ACLIndex) ofType(typ kmsg.ACLResourceType) *typeACLs {
	if x == nil {
		return nil
	}
	return x.byType[typ]
}

// covering calls f with each group of ACLs whose pattern covers name
// (every ACL that matchesResource(typ, name)), until f returns false.
func (t *typeACLs) covering(name string, f func([]ACL) bool) {
	if t == nil {
		return
	}
	if !f(t.literal[name]) || !f(t.wildcard) {
		return
	}
	for _, l := range t.prefixLens {
		if l > len(name) {
			return
		}
		if !f(t.prefixed[name[:l]]) {
			return
		}
	}
}
