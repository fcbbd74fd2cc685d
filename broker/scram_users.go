package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// scramMechanisms are KIP-554's wire codes of the SCRAM mechanisms.
var scramMechanisms = map[int8]string{1: auth.ScramSHA256, 2: auth.ScramSHA512}

func scramCode(mechanism string) int8 {
	for code, m := range scramMechanisms {
		if m == mechanism {
			return code
		}
	}
	return 0
}

// serveDescribeUserScramCredentials lists users' SCRAM mechanisms and
// iteration counts (never salts or keys), all users when none is named.
func (n *Node) serveDescribeUserScramCredentials(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	v := n.meta.View()
	var names []string
	count := map[string]int{}
	if r.Users == nil {
		for name := range v.ScramUsers {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	for _, u := range r.Users {
		if count[u.Name]++; count[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	for _, name := range names {
		out := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		out.User = name
		switch u := v.ScramUsers[name]; {
		case count[name] > 1:
			out.ErrorCode = kerr.DuplicateResource.Code
			out.ErrorMessage = kmsg.StringPtr("user " + name + " named more than once")
		case u == nil:
			out.ErrorCode = kerr.ResourceNotFound.Code
			out.ErrorMessage = kmsg.StringPtr("attempt to describe a user credential that does not exist")
		default:
			for _, m := range auth.ScramMechanisms() {
				if c, ok := u.Credentials[m]; ok {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = scramCode(m), int32(c.Iterations)
					out.CredentialInfos = append(out.CredentialInfos, info)
				}
			}
		}
		resp.Results = append(resp.Results, out)
	}
	return kafka.Ready(resp)
}

// serveAlterUserScramCredentials upserts and deletes SCRAM credentials,
// one metadata command per user, all of a user's changes or none. The
// request carries salted passwords (KIP-554): the broker never sees a
// password.
func (n *Node) serveAlterUserScramCredentials(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(0))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		refused := !n.allowedCluster(c, r.Key(), kmsg.ACLOperationAlter) // authorize.go
		for _, a := range scramAlters(r) {
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User = a.cmd.User
			err := a.err
			if refused {
				err = kerr.ClusterAuthorizationFailed
			}
			if err == nil {
				err = n.alterScram(ctx, a.cmd)
			}
			out.ErrorCode, out.ErrorMessage = coordinator.KafkaError(err)
			resp.Results = append(resp.Results, out)
		}
		f.Complete(resp, nil)
	}()
	return f
}

// scramAlter is one user's part of an AlterUserScramCredentials, or why
// it is refused before it reaches the metadata.
type scramAlter struct {
	cmd *coordinator.AlterScramCredentials
	err error
}

// scramAlters groups r by user, in the order users first appear.
func scramAlters(r *kmsg.AlterUserSCRAMCredentialsRequest) []scramAlter {
	var out []scramAlter
	byUser := map[string]int{}
	get := func(user string) *scramAlter {
		i, ok := byUser[user]
		if !ok {
			i = len(out)
			byUser[user] = i
			out = append(out, scramAlter{cmd: &coordinator.AlterScramCredentials{User: user}})
		}
		return &out[i]
	}
	for _, d := range r.Deletions {
		a := get(d.Name)
		m, ok := scramMechanisms[d.Mechanism]
		if !ok {
			a.setErr(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism code")
			continue
		}
		a.cmd.Deletions = append(a.cmd.Deletions, m)
	}
	for _, u := range r.Upsertions {
		a := get(u.Name)
		m, ok := scramMechanisms[u.Mechanism]
		if !ok {
			a.setErr(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism code")
			continue
		}
		cred, err := auth.FromSalted(m, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			a.setErr(kerr.UnacceptableCredential, err.Error())
			continue
		}
		a.cmd.Upserts = append(a.cmd.Upserts, cred)
	}
	for i := range out {
		if out[i].err == nil {
			if err := coordinator.CheckScramAlter(out[i].cmd); err != nil {
				out[i].err = err
			}
		}
	}
	return out
}

func (a *scramAlter) setErr(code *kerr.Error, msg string) {
	if a.err == nil {
		a.err = &coordinator.Error{Code: code, Msg: msg}
	}
}

func (n *Node) alterScram(ctx context.Context, a *coordinator.AlterScramCredentials) error {
	if id, ok := n.brokerWithout(func(b *coordinator.Broker) bool { return b.Scram }); ok {
		// Its binary would not apply the change: its metadata would
		// diverge (coordinator/doc.go, "Versions").
		return &coordinator.Error{Code: kerr.UnsupportedVersion, Msg: fmt.Sprintf("broker %d runs a version without SCRAM users; its metadata would diverge", id)}
	}
	if len(n.meta.View().ScramDecoyKey) == 0 {
		a.DecoyKey = coordinator.NewDecoyKey() // the first user's command sets the cluster's
	}
	res, err := n.ctl.Propose(ctx, &coordinator.Command{AlterScramCredentials: a})
	return firstErr(metaKafkaError(err), res.Err)
}
