package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	args    string // its positional arguments, for the usage
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"server":    {"", "run one raftq node", runServer},
		"dev":       {"", "run a 3-node cluster on loopback", runDev},
		"topic":     {"create|list|describe|alter|delete [TOPIC]", "create, list, describe, alter or delete topics", runTopic},
		"produce":   {"TOPIC", "produce stdin lines or generated load", runProduce},
		"consume":   {"TOPIC", "consume records", runConsume},
		"cluster":   {"status|decommission|recommission|remove|maintenance", "cluster status; empty, return or forget a node; a node's maintenance mode", runCluster},
		"bench":     {"", "measure produce throughput and latency", runBench},
		"floor":     {"", "measure the least a replicated, fsynced commit costs on this disk (no raft, no Kafka)", runFloor},
		"group":     {"list|describe|reset-offsets [GROUP]", "list, describe or reset consumer groups", runGroup},
		"partition": {"move|status|cancel|elect [TOPIC/PARTITION...]", "move partitions to other brokers, follow or cancel moves, elect leaders", runPartition},
		"jepsen":    {"run|check [DIR]", "run a Jepsen test against a local cluster under faults", runJepsen},
		"user":      {"create|delete|list [USER]", "create, delete or list SASL/SCRAM users", runUser},
		"acl":       {"add|list|remove", "add, list or remove Kafka ACLs (as kafka-acls.sh)", runACL},
	}
}

// env is what a command reads and writes; tests substitute buffers.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// getenv reads the environment; nil is an empty one, so that tests
	// run in-process do not see the variables of the shell that runs
	// them.
	getenv func(string) string
}

// Environment variables that set the client commands' flag defaults;
// raftq dev prints the line that exports them.
const (
	envBrokers = "RAFTQ_BROKERS" // --brokers
	envAdmin   = "RAFTQ_ADMIN"   // --admin
)

// flagDefault is the value of the environment variable name, if set, or
// else def.
func (e *env) flagDefault(name, def string) string {
	if e.getenv != nil {
		if v := e.getenv(name); v != "" {
			return v
		}
	}
	return def
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C or SIGTERM asks the command to wind up (a node to
	// stop cleanly, a client to collect its answers); a second Ctrl-C
	// kills it, while a supervisor's repeated SIGTERM changes nothing.
	context.AfterFunc(ctx, func() {
		signal.Ignore(syscall.SIGTERM)
		stop()
	})
	os.Exit(run(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:]))
}

func run(ctx context.Context, e *env, args []string) int {
	cmds := commands()
	if len(args) == 0 {
		usage(e.stderr, cmds)
		return 2
	}
	if isHelp(args[0]) {
		usage(e.stdout, cmds)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "raftq: unknown command %q\n\n", args[0])
		usage(e.stderr, cmds)
		return 2
	}
	if err := c.run(ctx, e, args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(e.stderr, "raftq %s: %s\n", args[0], err)
			return 2
		}
		fmt.Fprintf(e.stderr, "raftq %s: %s\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: raftq COMMAND [flags] [ARGS]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range names {
		c := cmds[n]
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(n+" "+c.args), c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nraftq COMMAND --help lists a command's flags.")
}

// usageError is a bad flag or argument: exit status 2.
type usageError struct{ error }

// newFlags returns a flag set for a subcommand that reports errors
// instead of exiting; positional names its arguments for the usage line
// ("TOPIC"), empty if it takes none.
func newFlags(e *env, name, positional string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("raftq "+name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: %s\n\nflags:\n%s", usageLine(name, positional), fs.FlagUsages())
	}
	return fs
}

// usageLine is a command's synopsis: "raftq produce [flags] TOPIC".
func usageLine(name, positional string) string {
	return strings.TrimSpace("raftq " + name + " [flags] " + positional)
}

// parse parses args, wrapping errors as usage errors.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}
