package broker

import (
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/transport/kafka"
)

// validateAuthorizer checks the super users' form.
func (c *Config) validateAuthorizer() error {
	for _, p := range c.SuperUsers {
		if err := auth.CheckPrincipal(p); err != nil {
			return fmt.Errorf("broker: super user: %w", err)
		}
	}
	return nil
}

// authorizer returns the Authorizer of the node's configuration.
func (n *Node) authorizer() *auth.Authorizer {
	return &auth.Authorizer{SuperUsers: n.cfg.SuperUsers, AllowEveryoneIfNoACLFound: n.cfg.AllowEveryoneIfNoACLFound}
}

// aclIndex is the index of the node's view of the ACLs, built again only
// when they change (derived.go).
func (n *Node) aclIndex() *auth.ACLIndex {
	return n.acls.get(n.meta.View().ACLs, sameSlice, auth.IndexACLs)
}

// clientHost is c's remote IP, as Kafka's ACL hosts name them.
func clientHost(c *kafka.Conn) string {
	addr := c.RemoteAddr()
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// action is what c asks to do on one resource.
func action(c *kafka.Conn, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) auth.Action {
	return auth.Action{Principal: c.Principal(), Host: clientHost(c), Operation: op, ResourceType: typ, ResourceName: name}
}

// allowed reports whether c may do op on the resource (typ, name), for
// request api; with the authorizer off, everything is. A refusal is
// audited (logged and counted).
func (n *Node) allowed(c *kafka.Conn, api int16, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !n.cfg.Authorizer {
		return true
	}
	a := action(c, op, typ, name)
	if n.authorizer().Authorize(n.aclIndex(), a) {
		return true
	}
	n.audit(api, a)
	return false
}

// allowedQuiet is allowed without the audit, for filtering lists
// (Metadata of all topics, ListGroups) where Kafka logs no denial
// either: a principal not seeing what it may not describe is not a
// refused request.
func (n *Node) allowedQuiet(c *kafka.Conn, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	return !n.cfg.Authorizer || n.authorizer().Authorize(n.aclIndex(), action(c, op, typ, name))
}

// allowedAny reports whether c may do op on some resource of typ (Kafka's
// authorizeByResourceType), without audit: callers fall back to a
// resource check that audits.
func (n *Node) allowedAny(c *kafka.Conn, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool {
	return !n.cfg.Authorizer || n.authorizer().AllowedAny(n.aclIndex(), action(c, op, typ, ""))
}

// allowedCluster is allowed on the CLUSTER resource.
func (n *Node) allowedCluster(c *kafka.Conn, api int16, op kmsg.ACLOperation) bool {
	return n.allowed(c, api, op, kmsg.ACLResourceTypeCluster, auth.ClusterName)
}

// audit records one denied request: a log line at Info, since a denial
// is an outcome an operator of a secured cluster wants to see without
// debug logging and is bounded by the client's own request rate (Kafka
// logs denials at INFO on its authorizer logger), and the counter
// raftq_authorization_denied_total.
func (n *Node) audit(api int16, a auth.Action) {
	name := kmsg.NameForKey(api)
	n.log.Info("authorization denied", "component", "audit", "principal", a.Principal, "host", a.Host,
		"api", name, "resource_type", a.ResourceType.String(), "resource", a.ResourceName, "operation", a.Operation.String())
	n.metrics.denied.WithLabelValues(name, a.ResourceType.String()).Inc()
}

// clusterResource is the one CLUSTER resource's name.
const clusterResource = auth.ClusterName
