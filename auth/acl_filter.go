package auth

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLFilter selects ACLs, for DescribeAcls and DeleteAcls: a nil string
// matches any value, ANY matches any enum value, and the pattern type
// MATCH selects every ACL that would apply to the named resource
// (literal name, literal "*", prefixes of the name).
type ACLFilter struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName *string                     `json:"resource_name,omitempty"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    *string                     `json:"principal,omitempty"`
	Host         *string                     `json:"host,omitempty"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// Check refuses a filter with an UNKNOWN (or out of range) field, as
// Kafka answers INVALID_REQUEST.
func (f ACLFilter) Check() error {
	switch {
	case f.ResourceType < kmsg.ACLResourceTypeAny || f.ResourceType > kmsg.ACLResourceTypeUser:
		return invalid("filter resource type %s", f.ResourceType)
	case f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return invalid("filter pattern type %s", f.PatternType)
	case !validOperation(f.Operation):
		return invalid("filter operation %s", f.Operation)
	case f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow:
		return invalid("filter permission %s", f.Permission)
	}
	return nil
}

// Matches reports whether f selects a.
func (f ACLFilter) Matches(a ACL) bool {
	return f.matchesPattern(a) &&
		(f.Principal == nil || *f.Principal == a.Principal) &&
		(f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == a.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == a.Permission)
}

// matchesPattern is Kafka's ResourcePatternFilter.matches.
func (f ACLFilter) matchesPattern(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
		return false
	}
	anyPattern := f.PatternType == kmsg.ACLResourcePatternTypeAny || f.PatternType == kmsg.ACLResourcePatternTypeMatch
	if !anyPattern && f.PatternType != a.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == a.ResourceName
	}
	if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, a.ResourceName)
	}
	return name == a.ResourceName || a.ResourceName == Wildcard
}

// Select returns the ACLs of acls that f matches, in order.
func (f ACLFilter) Select(acls []ACL) []ACL {
	var out []ACL
	for _, a := range acls {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}
