package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/raftq/raftq/broker"
)

// clusterMaintenance is `raftq cluster maintenance N on|off`: it turns
// node N's maintenance mode (Redpanda's) on or off through any node's
// admin API. On, node N hands over every leadership it holds and is
// handed none until it is turned off; with --wait the command returns
// once N leads nothing.
func clusterMaintenance(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "cluster maintenance", "NODE on|off")
	af := bindAdminFlags(e, fs, "admin HTTP address of any node")
	wait := fs.Bool("wait", false, "with on: wait until the node leads nothing")
	timeout := fs.Duration("timeout", time.Minute, "how long --wait waits")
	if err := parse(fs, args); err != nil {
		return err
	}
	id, on, err := maintenanceArgs(fs.Args())
	if err != nil {
		return err
	}
	a, err := af.client() // client_admin.go
	if err != nil {
		return err
	}
	res, err := putMaintenance(ctx, a, af.addr, id, on)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "node %d: maintenance %s\n", res.ID, onOff(res.Maintenance))
	if !on || !*wait {
		return nil
	}
	return awaitDrained(ctx, e, a, af.addr, id, *timeout)
}

func maintenanceArgs(args []string) (uint64, bool, error) {
	if len(args) != 2 {
		return 0, false, usageError{errors.New("want: cluster maintenance NODE on|off")}
	}
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || id == 0 {
		return 0, false, usageError{fmt.Errorf("node %q: want a node id", args[0])}
	}
	switch args[1] {
	case "on":
		return id, true, nil
	case "off":
		return id, false, nil
	}
	return 0, false, usageError{fmt.Errorf("%q: want on or off", args[1])}
}

// putMaintenance asks the node at admin to turn node id's maintenance on
// (PUT) or off (DELETE).
func putMaintenance(ctx context.Context, a *adminClient, admin string, id uint64, on bool) (broker.MaintenanceResult, error) {
	var res broker.MaintenanceResult
	method := http.MethodDelete
	if on {
		method = http.MethodPut
	}
	if err := a.do(ctx, admin, method, fmt.Sprintf("/v1/brokers/%d/maintenance", id), 15*time.Second, &res); err != nil {
		return res, fmt.Errorf("maintenance %s for node %d: %w", onOff(on), id, err)
	}
	return res, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// awaitDrained polls node id's status until it leads nothing, printing
// what it still leads each second, for at most timeout.
func awaitDrained(ctx context.Context, e *env, a *adminClient, admin string, id uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	lastSaid := time.Time{}
	for {
		s, err := nodeStatusVia(ctx, a, admin, id)
		if err == nil {
			parts, meta := leaderships(&s)
			if parts == 0 && !meta {
				fmt.Fprintf(e.stdout, "node %d leads nothing (%s)\n", id, time.Since(start).Round(100*time.Millisecond))
				return nil
			}
			if time.Since(lastSaid) >= time.Second {
				fmt.Fprintf(e.stdout, "node %d still leads %s\n", id, leadsText(parts, meta))
				lastSaid = time.Now()
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			if err == nil {
				err = errors.New("it still leads")
			}
			return fmt.Errorf("node %d not drained within %s: %w", id, timeout, err)
		}
	}
}

// nodeStatusVia reads node id's status, finding its admin address in
// the status of the node at admin.
func nodeStatusVia(ctx context.Context, a *adminClient, admin string, id uint64) (broker.Status, error) {
	seed, err := a.status(ctx, admin)
	if err != nil || seed.NodeID == id {
		return seed, err
	}
	for _, b := range seed.Brokers {
		if b.ID == id {
			return a.status(ctx, b.AdminAddr)
		}
	}
	return broker.Status{}, fmt.Errorf("node %d is not registered", id)
}

// leaderships counts the partitions a node's status shows it leading,
// and whether it leads group 0.
func leaderships(s *broker.Status) (partitions int, metadata bool) {
	for _, p := range s.Partitions {
		if p.Role == "leader" {
			partitions++
		}
	}
	return partitions, s.Metadata.Role == "leader"
}

func leadsText(parts int, meta bool) string {
	out := count(parts, "partition")
	if meta {
		out += " and the metadata group"
	}
	return out
}

// printMaintenance prints, per node, whether it is in maintenance and
// what it leads: what a maintenance drain has left to hand over.
func printMaintenance(e *env, seed broker.Status, statuses map[uint64]*broker.Status) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tMAINTENANCE\tLEADS PARTITIONS\tLEADS METADATA")
	for _, b := range seed.Brokers {
		parts, meta := "-", "-"
		if s := statuses[b.ID]; s != nil {
			n, m := leaderships(s)
			parts, meta = strconv.Itoa(n), yesNo(m)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", b.ID, onOff(b.Maintenance), parts, meta)
	}
	w.Flush()
	fmt.Fprintln(e.stdout)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
