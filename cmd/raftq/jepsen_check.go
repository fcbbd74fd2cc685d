package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/raftq/raftq/jepsen"
)

// runJepsenCheck is `raftq jepsen check [flags] DIR`: it checks the
// history.jsonl a `raftq jepsen run` left in DIR again, rewrites the
// report beside it (results.json, plots, index.html) and prints the
// verdict as the run does. It judges the history alone: node crashes and
// run errors, which the run also counted, are not in it. It exits
// non-zero unless every checker passed (or is allowed). Without --allow a
// txn run's history is checked with G0 and G1c allowed, as the run was.
func runJepsenCheck(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "jepsen check", "DIR")
	cfg := jepsen.DefaultCheckConfig()
	fs.DurationVar(&cfg.LinearizabilityTimeout, "linearizability-timeout", cfg.LinearizabilityTimeout, "bound on porcupine's search per partition; a partition that runs out is unknown")
	fs.BoolVar(&cfg.SkipLinearizability, "skip-linearizability", cfg.SkipLinearizability, "do not run porcupine (its verdict is then unknown)")
	fs.IntVar(&cfg.MaxExamples, "max-examples", cfg.MaxExamples, "anomalies each checker lists in the report")
	fs.StringSliceVar(&cfg.Allowed, "allow", cfg.Allowed, "checkers whose anomalies are reported but do not fail the check: "+strings.Join(jepsen.CheckerNames, ", "))
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one report directory: raftq jepsen check [flags] DIR")}
	}
	dir := fs.Arg(0)
	if s := jepsen.PreviousSetup(dir); !fs.Changed("allow") && s != nil && s.Txn {
		cfg.Allowed = append(cfg.Allowed, txnAllowedCheckers()...) // as the txn run did
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	res, err := jepsen.Recheck(dir, cfg)
	if err != nil {
		return err
	}
	problems := printVerdict(e, dir, res, "")
	fmt.Fprintf(e.stdout, "measures: %s\n", res.Measures)
	if res.Setup != nil {
		fmt.Fprintf(e.stdout, "setup: %s\n", res.Setup)
	}
	return failedRun(problems)
}
