package main

import (
	"strings"
	"testing"
)

// TestACLCommand_BadInput: malformed acl commands are usage errors
// (exit 2) naming what is wrong, before any broker is dialled.
func TestACLCommand_BadInput(t *testing.T) {
	const nowhere = "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acl", "add", "--topic", "a", "--operation", "Read"}, "--allow-principal or --deny-principal"},
		{[]string{"acl", "add", "--allow-principal", "User:a", "--operation", "Read"}, "give a resource"},
		{[]string{"acl", "add", "--allow-principal", "User:a", "--topic", "a"}, "give --operation"},
		{[]string{"acl", "add", "--allow-principal", "User:a", "--topic", "a", "--operation", "Fly"}, `--operation "Fly"`},
		{[]string{"acl", "add", "--allow-principal", "User:a", "--topic", "a", "--operation", "Any"}, `--operation "Any"`},
		{[]string{"acl", "add", "--allow-principal", "User:a", "--topic", "a", "--operation", "Read", "--resource-pattern-type", "glob"}, "--resource-pattern-type"},
		{[]string{"acl", "remove", "--operation", "Read"}, "give a resource"},
		{[]string{"acl", "list", "--resource-pattern-type", "glob"}, "--resource-pattern-type"},
	} {
		res := cli(t, 2, "", append(tc.args, "-b", nowhere)...)
		if !strings.Contains(res.stderr, tc.want) {
			t.Errorf("raftq %s: stderr %q, want it to name %s", strings.Join(tc.args, " "), res.stderr, tc.want)
		}
	}
}
