package main

import (
	"context"
	"fmt"
	"strings"
)

// subcommand is one verb of a command such as "raftq topic".
type subcommand struct {
	name string
	run  func(context.Context, *env, []string) error
}

// runSubcommand runs the subcommand that args name, or explains which
// exist.
func runSubcommand(ctx context.Context, e *env, args []string, subs []subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return usageError{fmt.Errorf("want a subcommand: %s", want)}
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	return usageError{fmt.Errorf("unknown subcommand %q: want %s", args[0], want)}
}
