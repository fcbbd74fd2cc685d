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
