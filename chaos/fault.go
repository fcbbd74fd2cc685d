package chaos

import "context"

// StartFault starts one fault on env exactly as Run would, and returns
// the nodes it acted on (resolving a leader target or an isolate-leader
// grudge at this moment) and a description for people. Callers that
// drive faults from their own clock (jepsen's nemesis runner) use it with
// StopFault instead of Run.
func StartFault(ctx context.Context, env Env, f Fault) (nodes []int, detail string, err error) {
	r := &run{env: env}
	return r.begin(ctx, f)
}

// StopFault ends fault f, whose start acted on nodes, as Run would:
// restart killed nodes, resume paused ones, heal partitions, or restart
// every node after lose-unfsynced.
func StopFault(ctx context.Context, env Env, f Fault, nodes []int) (detail string, err error) {
	r := &run{env: env}
	return r.end(ctx, f, nodes)
}
