package auth

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Action is one thing a principal asks to do: an operation on one named
// resource, from a host.
type Action struct {
	Principal    string // "User:alice"; AnonymousPrincipal when unauthenticated
	Host         string // the client's IP
	Operation    kmsg.ACLOperation
	ResourceType kmsg.ACLResourceType
	ResourceName string
}

// Authorizer decides Actions against a set of ACLs with Kafka's rules
// (StandardAuthorizer):
//
//   - a super user may do anything;
//   - when no ACL at all covers the resource (whoever it names),
//     AllowEveryoneIfNoACLFound decides;
//   - a DENY naming the principal (or User:*), the host (or *) and the
//     operation (or ALL) refuses, whatever allows;
//   - otherwise an ALLOW naming them allows, where ALLOW READ, WRITE,
//     DELETE or ALTER also allow DESCRIBE and ALLOW ALTER_CONFIGS allows
//     DESCRIBE_CONFIGS (a DENY implies nothing: it refuses exactly its
//     operation, or every one when ALL);
//   - otherwise the action is refused.
type Authorizer struct {
	// SuperUsers are principals ("User:admin") that every action is
	// allowed to.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is Kafka's allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
}

// Authorize reports whether acls allow a.
func (z *Authorizer) Authorize(acls *ACLIndex, a Action) bool {
	if slices.Contains(z.SuperUsers, a.Principal) {
		return true
	}
	covered, allowed, denied := false, false, false
	acls.ofType(a.ResourceType).covering(a.ResourceName, func(group []ACL) bool {
		for _, acl := range group {
			covered = true
			if !acl.matchesWho(a.Principal, a.Host) {
				continue
			}
			switch acl.Permission {
			case kmsg.ACLPermissionTypeDeny:
				if acl.Operation == kmsg.ACLOperationAll || acl.Operation == a.Operation {
					denied = true
					return false
				}
			case kmsg.ACLPermissionTypeAllow:
				allowed = allowed || allows(acl.Operation, a.Operation)
			}
		}
		return true
	})
	switch {
	case denied:
		return false
	case !covered:
		return z.AllowEveryoneIfNoACLFound
	}
	return allowed
}

// allows reports whether an ALLOW of granted permits op.
func allows(granted, op kmsg.ACLOperation) bool {
	switch {
	case granted == kmsg.ACLOperationAll || granted == op:
		return true
	case op == kmsg.ACLOperationDescribe:
		return granted == kmsg.ACLOperationRead || granted == kmsg.ACLOperationWrite ||
			granted == kmsg.ACLOperationDelete || granted == kmsg.ACLOperationAlter
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// AllowedAny reports whether a is allowed on at least one resource of
// its type: a super user, an ALLOW for the principal on a pattern of the
// type that no DENY covers whole, or AllowEveryoneIfNoACLFound and some
// name no ACL covers. It is Kafka's authorizeByResourceType, used for
// the idempotent producer's WRITE on "any topic".
func (z *Authorizer) AllowedAny(acls *ACLIndex, a Action) bool {
	// As Kafka, a name no one would pick first: a super user, an ALLOW
	// on "*" or, with AllowEveryoneIfNoACLFound, a name no ACL covers.
	probe := a
	probe.ResourceName = "hardcode"
	if z.Authorize(acls, probe) {
		return true
	}
	t := acls.ofType(a.ResourceType)
	if t == nil {
		return false
	}
	for _, acl := range t.all {
		if acl.Permission != kmsg.ACLPermissionTypeAllow || !acl.matchesWho(a.Principal, a.Host) || !allows(acl.Operation, a.Operation) {
			continue
		}
		probe := a
		probe.ResourceName = acl.sampleName()
		if z.Authorize(acls, probe) {
			return true
		}
	}
	return false
}

// sampleName is a resource name a's pattern covers and no other pattern
// covers unless it covers every name a's does: the name itself for a
// literal, one made up beyond the prefix (or the wildcard) otherwise.
func (a ACL) sampleName() string {
	const beyond = "\x00sample"
	switch {
	case a.PatternType == kmsg.ACLResourcePatternTypePrefixed:
		return a.ResourceName + beyond
	case a.ResourceName == Wildcard:
		return beyond
	}
	return a.ResourceName
}
