package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/raftq/raftq/jepsen"
)

func TestJepsenFlags_Txn(t *testing.T) {
	c, err := jepsenConfig(t)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Run.Workload; w.Txn || w.ReadCommitted || len(c.Run.Check.Allowed) != 0 {
		t.Errorf("default: txn %v read_committed %v allowed %v", w.Txn, w.ReadCommitted, c.Run.Check.Allowed)
	}
	if c, err = jepsenConfig(t, "--txn", "--txn-sends", "2", "--txn-abort-p", "0.5", "--txn-poll-p", "0"); err != nil {
		t.Fatal(err)
	}
	w := c.Run.Workload
	if !w.Txn || !w.ReadCommitted || w.TxnSends != 2 || w.TxnAbortP != 0.5 || w.TxnPollP != 0 {
		t.Errorf("--txn: %+v", w)
	}
	// G0 and G1c are allowed in txn runs, where this build has them.
	want := []string{}
	for _, n := range []string{"G0", "G1c"} {
		if slices.Contains(jepsen.CheckerNames, n) {
			want = append(want, n)
		}
	}
	if got := c.Run.Check.Allowed; !slices.Equal(append([]string{}, got...), want) {
		t.Errorf("--txn allows %v, want %v", got, want)
	}
	if err := c.Run.Check.Validate(); err != nil {
		t.Errorf("--txn check config: %v", err)
	}
	if c, err = jepsenConfig(t, "--txn", "--allow", jepsen.CheckLostWrite); err != nil {
		t.Fatal(err)
	}
	if got := c.Run.Check.Allowed; !slices.Equal(got, []string{jepsen.CheckLostWrite}) {
		t.Errorf("--txn --allow lost-write allows %v", got)
	}
	if c, err = jepsenConfig(t, "--allow", jepsen.CheckUnseen); err != nil || !slices.Equal(c.Run.Check.Allowed, []string{jepsen.CheckUnseen}) {
		t.Errorf("--allow unseen: %v, %v", c.Run.Check.Allowed, err)
	}
	for _, bad := range [][]string{
		{"--txn", "--acks", "1"}, {"--txn", "--idempotent=false"}, {"--txn", "--txn-sends", "0"},
		{"--txn-abort-p", "2"}, {"--txn", "--txn-poll-p", "-1"}, {"--allow", "no-such-checker"},
	} {
		var ue usageError
		if _, err := jepsenConfig(t, bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
