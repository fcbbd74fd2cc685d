package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/broker"
)

// bindACLFlags binds the authorizer's flags. Kafka names a class
// (authorizer.class.name); raftq has one authorizer, Kafka's
// StandardAuthorizer semantics over ACLs in the metadata group, so the
// choice is --authorizer on or off. --super-users and
// --allow-everyone-if-no-acl-found are super.users and
// allow.everyone.if.no.acl.found, spelt as flags.
func bindAuthorizerFlags(fs *pflag.FlagSet, c *broker.Config) {
	fs.BoolVar(&c.Authorizer, "authorizer", false, "authorize every request against the cluster's ACLs (raftq acl add|list|remove); without it anyone may do anything and the ACL APIs answer SECURITY_DISABLED")
	fs.Var((*superUsers)(&c.SuperUsers), "super-users", `principals allowed everything, separated by ';' as Kafka's super.users, e.g. "User:admin;User:ANONYMOUS"`)
	fs.BoolVar(&c.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", false, "let everyone do what no ACL covers (Kafka's allow.everyone.if.no.acl.found); without it only super users may")
}

// superUsers is a pflag.Value of Kafka's "User:a;User:b" list.
type superUsers []string

func (s *superUsers) String() string { return strings.Join(*s, ";") }

func (s *superUsers) Type() string { return "principals" }

func (s *superUsers) Set(v string) error {
	for _, p := range strings.Split(v, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if err := auth.CheckPrincipal(p); err != nil {
			return fmt.Errorf("super user %q: want Type:name, e.g. User:admin", p)
		}
		*s = append(*s, p)
	}
	return nil
}
