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
	if isHelp(args[0]) {
		fmt.Fprintf(e.stderr, "subcommands: %s (each takes --help)\n", want)
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	return usageError{fmt.Errorf("unknown subcommand %q: want %s", args[0], want)}
}

// isHelp reports whether arg asks for help rather than naming something.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "help"
}

// count writes n and a noun, plural unless n is 1: "1 record", "3 records".
func count[N int64 | int | uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
