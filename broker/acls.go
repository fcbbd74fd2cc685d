package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// aclsRefused is why an ACL request is not served: SECURITY_DISABLED
// without an authorizer (as Kafka without authorizer.class.name), or
// CLUSTER_AUTHORIZATION_FAILED without op on the cluster.
func (n *Node) aclsRefused(c *kafka.Conn, key int16, op kmsg.ACLOperation) (int16, *string) {
	if !n.cfg.Authorizer {
		return kerr.SecurityDisabled.Code, kmsg.StringPtr("no authorizer is configured on the broker")
	}
	if !n.allowedCluster(c, key, op) {
		return kerr.ClusterAuthorizationFailed.Code, nil
	}
	return 0, nil
}

// aclsChangeRefused is why an ACL change is not made: aclsRefused for
// ALTER, then aclsUnsupported.
func (n *Node) aclsChangeRefused(c *kafka.Conn, key int16) (int16, *string) {
	if code, msg := n.aclsRefused(c, key, kmsg.ACLOperationAlter); code != 0 {
		return code, msg
	}
	return n.aclsUnsupported()
}

// aclsUnsupported refuses to propose an ACL change while a registered
// broker's binary would not apply it (coordinator/doc.go, "Versions"):
// its metadata would diverge.
func (n *Node) aclsUnsupported() (int16, *string) {
	if id, ok := n.brokerWithout(func(b *coordinator.Broker) bool { return b.ACLs }); ok {
		return kerr.UnsupportedVersion.Code, kmsg.StringPtr(fmt.Sprintf("broker %d runs a version without ACLs; its metadata would diverge", id))
	}
	return 0, nil
}

// serveCreateACLs stores the valid creations in one metadata command;
// each invalid one is answered INVALID_REQUEST with the reason, as Kafka.
// The proposal waits out a metadata election (as Kafka's broker waits on
// its controller), since clients do not retry NOT_CONTROLLER per ACL.
func (n *Node) serveCreateACLs(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if code, msg := n.aclsChangeRefused(c, r.Key()); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return kafka.Ready(resp)
	}
	var acls []auth.ACL
	var at []int
	for i, cr := range r.Creations {
		a := aclOfCreation(cr, r.Version)
		if err := coordinator.CheckACL(a); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = coordinator.KafkaError(err)
			continue
		}
		acls, at = append(acls, a), append(at, i)
	}
	if len(acls) == 0 {
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(0))
		defer cancel()
		res, err := n.ctl.ProposeRetry(ctx, &coordinator.Command{CreateACLs: &coordinator.CreateACLs{ACLs: acls}})
		code, msg := coordinator.KafkaError(firstErr(metaKafkaError(err), res.Err))
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		f.Complete(resp, nil)
	}()
	return f
}

func aclOfCreation(cr kmsg.CreateACLsRequestCreation, version int16) auth.ACL {
	pt := cr.ResourcePatternType
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return auth.ACL{ResourceType: cr.ResourceType, ResourceName: cr.ResourceName, PatternType: pt,
		Principal: cr.Principal, Host: cr.Host, Operation: cr.Operation, Permission: cr.PermissionType}
}

// serveDescribeACLs answers the ACLs the filter matches from this node's
// view, grouped by resource pattern in the order first held.
func (n *Node) serveDescribeACLs(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := n.aclsRefused(c, r.Key(), kmsg.ACLOperationDescribe); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return kafka.Ready(resp)
	}
	pt := r.ResourcePatternType
	if r.Version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	f := auth.ACLFilter{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: pt,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType}
	if err := coordinator.CheckACLFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = coordinator.KafkaError(err)
		return kafka.Ready(resp)
	}
	resp.Resources = describedResources(f.Select(n.meta.View().ACLs))
	return kafka.Ready(resp)
}

type aclPattern struct {
	typ  kmsg.ACLResourceType
	name string
	pt   kmsg.ACLResourcePatternType
}

func describedResources(acls []auth.ACL) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	at := map[aclPattern]int{}
	for _, a := range acls {
		p := aclPattern{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := at[p]
		if !ok {
			i = len(out)
			at[p] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = p.typ, p.name, p.pt
			out = append(out, res)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		out[i].ACLs = append(out[i].ACLs, e)
	}
	return out
}

// serveDeleteACLs removes, in one metadata command, what the valid
// filters match, and answers per filter what it matched; an invalid
// filter is answered INVALID_REQUEST and deletes nothing.
func (n *Node) serveDeleteACLs(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if code, msg := n.aclsChangeRefused(c, r.Key()); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return kafka.Ready(resp)
	}
	var filters []auth.ACLFilter
	var at []int
	for i, fr := range r.Filters {
		f := filterOfDelete(fr, r.Version)
		if err := coordinator.CheckACLFilter(f); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = coordinator.KafkaError(err)
			continue
		}
		filters, at = append(filters, f), append(at, i)
	}
	if len(filters) == 0 {
		return kafka.Ready(resp)
	}
	fut := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(0))
		defer cancel()
		res, err := n.ctl.ProposeRetry(ctx, &coordinator.Command{DeleteACLs: &coordinator.DeleteACLs{Filters: filters}})
		err = firstErr(metaKafkaError(err), res.Err)
		for k, i := range at {
			if err != nil {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = coordinator.KafkaError(err)
				continue
			}
			resp.Results[i].MatchingACLs = matchingACLs(res.ACLs[k])
		}
		fut.Complete(resp, nil)
	}()
	return fut
}

func filterOfDelete(fr kmsg.DeleteACLsRequestFilter, version int16) auth.ACLFilter {
	pt := fr.ResourcePatternType
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return auth.ACLFilter{ResourceType: fr.ResourceType, ResourceName: fr.ResourceName, PatternType: pt,
		Principal: fr.Principal, Host: fr.Host, Operation: fr.Operation, Permission: fr.PermissionType}
}

func matchingACLs(acls []auth.ACL) []kmsg.DeleteACLsResponseResultMatchingACL {
	out := make([]kmsg.DeleteACLsResponseResultMatchingACL, 0, len(acls))
	for _, a := range acls {
		m := kmsg.NewDeleteACLsResponseResultMatchingACL()
		m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
		m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		out = append(out, m)
	}
	return out
}
