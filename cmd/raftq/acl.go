package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func runACL(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"add", aclAdd}, {"list", aclList}, {"remove", aclRemove},
	})
}

// aclFlags are kafka-acls.sh's flags, for add, list and remove.
type aclFlags struct {
	allow, deny          []string
	allowHost, denyHost  []string
	ops                  []string
	topics, groups, txns []string
	cluster              bool
	pattern              string
	principal            string // list only
}

func bindACLFlags(fs *pflag.FlagSet, list bool, defaultPattern string) *aclFlags {
	f := &aclFlags{}
	if list {
		fs.StringVar(&f.principal, "principal", "", "list only the ACLs of this principal (User:name)")
	} else {
		fs.StringSliceVar(&f.allow, "allow-principal", nil, "principals (User:name, User:* for all) the ACLs allow")
		fs.StringSliceVar(&f.deny, "deny-principal", nil, "principals the ACLs deny")
		fs.StringSliceVar(&f.allowHost, "allow-host", nil, "hosts (IP addresses) the allow ACLs apply from (default *, every host)")
		fs.StringSliceVar(&f.denyHost, "deny-host", nil, "hosts the deny ACLs apply from (default *, every host)")
		fs.StringSliceVar(&f.ops, "operation", nil, "operations: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite")
	}
	fs.StringSliceVar(&f.topics, "topic", nil, "topic resources (* for every topic)")
	fs.StringSliceVar(&f.groups, "group", nil, "consumer group resources")
	fs.StringSliceVar(&f.txns, "transactional-id", nil, "transactional id resources")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	help := "literal or prefixed"
	if list {
		help = "any, match, literal or prefixed"
	}
	fs.StringVar(&f.pattern, "resource-pattern-type", defaultPattern, help)
	return f
}

func (f *aclFlags) hasResource() bool {
	return len(f.topics)+len(f.groups)+len(f.txns) > 0 || f.cluster
}

// builder is the flags as a kadm ACL builder.
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil {
		return nil, usageError{fmt.Errorf("--resource-pattern-type %q: %w", f.pattern, err)}
	}
	var ops []kadm.ACLOperation
	for _, s := range f.ops {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown || (!filter && op == kmsg.ACLOperationAny) {
			return nil, usageError{fmt.Errorf("--operation %q: unknown", s)}
		}
		ops = append(ops, op)
	}
	b := kadm.NewACLs().ResourcePatternType(pattern).Operations(ops...)
	if len(f.topics) > 0 {
		b.Topics(f.topics...)
	}
	if len(f.groups) > 0 {
		b.Groups(f.groups...)
	}
	if len(f.txns) > 0 {
		b.TransactionalIDs(f.txns...)
	}
	if f.cluster {
		b.Clusters()
	}
	if !f.hasResource() && filter {
		b.AnyResource()
	}
	if len(f.allow) > 0 {
		b.Allow(f.allow...).AllowHosts(hostsOrAll(f.allowHost, filter)...)
	}
	if len(f.deny) > 0 {
		b.Deny(f.deny...).DenyHosts(hostsOrAll(f.denyHost, filter)...)
	}
	return b, nil
}

// hostsOrAll is hosts, or "*" when none are given for a creation (a
// filter without hosts matches any host).
func hostsOrAll(hosts []string, filter bool) []string {
	if len(hosts) == 0 && !filter {
		return []string{"*"}
	}
	return hosts
}

// aclAdd creates ACLs: every allow and deny principal, from its hosts,
// for every operation on every resource named.
func aclAdd(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "acl add", "")
	cf := bindClientFlags(e, fs)
	f := bindACLFlags(fs, false, "literal")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case len(f.allow)+len(f.deny) == 0:
		return usageError{errors.New("give --allow-principal or --deny-principal")}
	case !f.hasResource():
		return usageError{errors.New("give a resource: --topic, --group, --transactional-id or --cluster")}
	case len(f.ops) == 0:
		return usageError{errors.New("give --operation")}
	}
	b, err := f.builder(false)
	if err != nil {
		return err
	}
	if err := b.ValidateCreate(); err != nil {
		return usageError{err}
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("create acls: %w", err)
	}
	var errs []error
	for _, r := range res {
		line := aclLine(r.Permission, r.Principal, r.Host, r.Operation, r.Type, r.Name, r.Pattern)
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w %s", line, r.Err, r.ErrMessage))
			continue
		}
		fmt.Fprintf(e.stdout, "added %s\n", line)
	}
	return errors.Join(errs...)
}

// aclList lists the ACLs that match: every one by default.
func aclList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "acl list", "")
	cf := bindClientFlags(e, fs)
	f := bindACLFlags(fs, true, "any")
	if err := parse(fs, args); err != nil {
		return err
	}
	b, err := f.builder(true)
	if err != nil {
		return err
	}
	if f.principal != "" {
		b.Allow(f.principal).AllowHosts().Deny(f.principal).DenyHosts()
	} else {
		b.Allow().AllowHosts().Deny().DenyHosts()
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("list acls: %w", err)
	}
	var lines []string
	seen := map[string]bool{}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("list acls: %w %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			l := aclRow(d.Permission, d.Principal, d.Host, d.Operation, d.Type, d.Name, d.Pattern)
			if !seen[l] {
				seen[l] = true
				lines = append(lines, l)
			}
		}
	}
	sort.Strings(lines)
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return w.Flush()
}

// aclRemove deletes the ACLs the flags match: the principals given (any
// when none), hosts given (any when none), operations given (any when
// none) on the resources named.
func aclRemove(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "acl remove", "")
	cf := bindClientFlags(e, fs)
	f := bindACLFlags(fs, false, "literal")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !f.hasResource() {
		return usageError{errors.New("give a resource: --topic, --group, --transactional-id or --cluster")}
	}
	b, err := f.builder(true)
	if err != nil {
		return err
	}
	if len(f.ops) == 0 {
		b.Operations()
	}
	if len(f.allow)+len(f.deny) == 0 {
		b.Allow().AllowHosts().Deny().DenyHosts()
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.DeleteACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("remove acls: %w", err)
	}
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("remove acls: %w %s", r.Err, r.ErrMessage))
			continue
		}
		for _, d := range r.Deleted {
			fmt.Fprintf(e.stdout, "removed %s\n", aclLine(d.Permission, d.Principal, d.Host, d.Operation, d.Type, d.Name, d.Pattern))
		}
	}
	return errors.Join(errs...)
}

func aclLine(perm kmsg.ACLPermissionType, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType) string {
	return fmt.Sprintf("%s %s from %s: %s on %s %s (%s)", perm, principal, host, op, typ, name, strings.ToLower(pattern.String()))
}

func aclRow(perm kmsg.ACLPermissionType, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType) string {
	return strings.Join([]string{typ.String(), name, pattern.String(), principal, host, op.String(), perm.String()}, "\t")
}
