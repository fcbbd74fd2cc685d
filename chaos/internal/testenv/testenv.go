// Package testenv decides what a chaos test does when the machine lacks a
// privilege or tool it needs (root, iptables, ip, /dev/fuse).
//
// A missing prerequisite fails the test with the reason and how to fix
// it: a fault-injection suite that silently skips proves nothing. Under CI
// (CI set) it always fails. Elsewhere a developer who knows the machine
// cannot run these tests may set RAFTQ_SKIP_PRIVILEGED=1 to skip them
// with the same message.
package testenv

import (
	"os"
	"testing"
)

// SkipEnv is the variable that turns a missing prerequisite into a skip
// outside CI.
const SkipEnv = "RAFTQ_SKIP_PRIVILEGED"

// Require fails (or, outside CI with SkipEnv=1, skips) t when err is a
// missing prerequisite.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "" && os.Getenv(SkipEnv) == "1" {
		t.Skipf("prerequisite missing (%s=1): %v", SkipEnv, err)
	}
	t.Fatalf("prerequisite missing: %v\n(set %s=1 to skip these tests outside CI)", err, SkipEnv)
}
