package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterName is the one name a CLUSTER resource has, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name, host or principal name that matches
// every other one (Kafka's "*").
const Wildcard = "*"

// WildcardPrincipal matches every user.
const WildcardPrincipal = "User:*"

// AnonymousPrincipal is who a connection is before (or without)
// authentication.
const AnonymousPrincipal = "User:ANONYMOUS"

// ErrInvalidACL is wrapped by every refusal of a malformed ACL or filter.
var ErrInvalidACL = errors.New("auth: invalid acl")

// ACL is one Kafka ACL binding: a resource pattern (type, name, pattern
// type) and an access control entry (principal, host, operation,
// permission). The enum fields carry Kafka's wire codes and marshal as
// Kafka's names.
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (a ACL) String() string {
	return fmt.Sprintf("(%s %s %s) %s %s from %s: %s", a.ResourceType, a.PatternType, a.ResourceName,
		a.Permission, a.Principal, a.Host, a.Operation)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidACL, fmt.Sprintf(format, args...))
}

// Check refuses an ACL that cannot be stored: an unknown, ANY or MATCH
// field, an empty name, a CLUSTER not named kafka-cluster, a principal
// not of the form Type:name, or a resource type raftq has no use for
// (DELEGATION_TOKEN, USER). Kafka refuses the same with INVALID_REQUEST.
func (a ACL) Check() error {
	if err := checkResourceType(a.ResourceType); err != nil {
		return err
	}
	switch {
	case a.PatternType != kmsg.ACLResourcePatternTypeLiteral && a.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return invalid("pattern type %s: want LITERAL or PREFIXED", a.PatternType)
	case a.ResourceName == "":
		return invalid("empty resource name")
	case a.ResourceType == kmsg.ACLResourceTypeCluster && (a.ResourceName != ClusterName || a.PatternType != kmsg.ACLResourcePatternTypeLiteral):
		return invalid("the only valid name for the CLUSTER resource is the literal %s", ClusterName)
	case a.Host == "":
		return invalid("empty host")
	case !validOperation(a.Operation) || a.Operation == kmsg.ACLOperationAny:
		return invalid("operation %s", a.Operation)
	case a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny:
		return invalid("permission %s: want ALLOW or DENY", a.Permission)
	}
	return CheckPrincipal(a.Principal)
}

func checkResourceType(t kmsg.ACLResourceType) error {
	switch t {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId:
		return nil
	case kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
		return invalid("resource type %s is not supported", t)
	}
	return invalid("resource type %s", t)
}

// validOperation: a known operation code; ANY is valid in filters only,
// and raftq has no delegation tokens.
func validOperation(op kmsg.ACLOperation) bool {
	return op >= kmsg.ACLOperationAny && op <= kmsg.ACLOperationIdempotentWrite
}

// CheckPrincipal refuses a principal not of Kafka's form Type:name.
func CheckPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return invalid("principal %q: want a string in format principalType:principalName", p)
	}
	return nil
}

// matchesWho: does a's entry name principal (or every principal:
// User:*, whatever the principal's type, as Kafka's StandardAuthorizer)
// from host (or every host)?
func (a ACL) matchesWho(principal, host string) bool {
	return (a.Principal == principal || a.Principal == WildcardPrincipal) &&
		(a.Host == host || a.Host == Wildcard)
}
