package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/raftq/raftq/auth"
)

func runUser(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"create", userCreate}, {"delete", userDelete}, {"list", userList},
	})
}

// scramMechanism maps a mechanism name to kadm's.
func scramMechanism(name string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(name) {
	case auth.ScramSHA256:
		return kadm.ScramSha256, nil
	case auth.ScramSHA512:
		return kadm.ScramSha512, nil
	}
	return 0, usageError{fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", name)}
}

// userCreate sets a user's SCRAM credentials (creating the user, or
// changing its password). The client salts the password; the cluster
// stores only the salted, iterated keys (KIP-554).
func userCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "user create", "USER")
	cf := bindClientFlags(e, fs)
	mechs := fs.StringSlice("mechanism", auth.ScramMechanisms(), "SCRAM mechanisms to set the password for")
	iters := fs.Int32("iterations", 8192, fmt.Sprintf("SCRAM iterations (%d to %d)", auth.MinIterations, auth.MaxIterations))
	password := fs.String("password", "", "the password (default: read one line from stdin)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one user")}
	}
	pw := *password
	if pw == "" {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if pw = strings.TrimRight(line, "\r\n"); pw == "" {
			return usageError{fmt.Errorf("no password: give --password or a line on stdin (%v)", err)}
		}
	}
	var ups []kadm.UpsertSCRAM
	for _, m := range *mechs {
		km, err := scramMechanism(m)
		if err != nil {
			return err
		}
		ups = append(ups, kadm.UpsertSCRAM{User: fs.Arg(0), Mechanism: km, Iterations: *iters, Password: pw})
	}
	return alterUsers(ctx, e, cf, nil, ups, "set")
}

func userDelete(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "user delete", "USER")
	cf := bindClientFlags(e, fs)
	mechs := fs.StringSlice("mechanism", nil, "SCRAM mechanisms to delete (default: every one the user has)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one user")}
	}
	user := fs.Arg(0)
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	names := *mechs
	if len(names) == 0 {
		desc, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return fmt.Errorf("describe user %s: %w", user, err)
		}
		if err := desc[user].Err; err != nil {
			return fmt.Errorf("user %s: %w", user, err)
		}
		for _, c := range desc[user].CredInfos {
			names = append(names, c.Mechanism.String())
		}
	}
	var dels []kadm.DeleteSCRAM
	for _, m := range names {
		km, err := scramMechanism(m)
		if err != nil {
			return err
		}
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: km})
	}
	return alterUsersWith(ctx, e, adm, dels, nil, "deleted")
}

func alterUsers(ctx context.Context, e *env, cf *clientFlags, dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM, did string) error {
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	return alterUsersWith(ctx, e, adm, dels, ups, did)
}

func alterUsersWith(ctx context.Context, e *env, adm *kadm.Client, dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM, did string) error {
	res, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return fmt.Errorf("alter users: %w", err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("user %s: %w", r.User, r.Err)
		}
		fmt.Fprintf(e.stdout, "user %s: credentials %s\n", r.User, did)
	}
	return nil
}

func userList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "user list", "")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		return fmt.Errorf("list users: %w", err)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
	for _, u := range desc.Sorted() {
		for _, c := range u.CredInfos {
			fmt.Fprintf(w, "%s\t%s\t%d\n", u.User, c.Mechanism, c.Iterations)
		}
	}
	return w.Flush()
}
