package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/raftq/raftq/broker"
)

// raftq cluster decommission|recommission|remove N change a broker
// through any node's admin API (broker/admin_brokers.go).

func clusterDecommission(ctx context.Context, e *env, args []string) error {
	return brokerChange(ctx, e, args, "decommission", "move every replica off broker N and place nothing new on it")
}

func clusterRecommission(ctx context.Context, e *env, args []string) error {
	return brokerChange(ctx, e, args, "recommission", "stop decommissioning broker N, cancelling the moves off it")
}

func clusterRemove(ctx context.Context, e *env, args []string) error {
	return brokerChange(ctx, e, args, "remove", "forget broker N, which must hold no replica; its data directory may not rejoin")
}

func brokerChange(ctx context.Context, e *env, args []string, action, what string) error {
	fs := newFlags(e, "cluster "+action, "N")
	af := bindAdminFlags(e, fs, "admin HTTP address of any node") // client_admin.go
	wait := false
	if action == "decommission" {
		fs.BoolVar(&wait, "wait", false, "wait until the broker holds no replica, printing progress")
	}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: raftq cluster %s N: %s\n\nflags:\n%s", action, what, fs.FlagUsages())
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	id, err := strconv.ParseUint(fs.Arg(0), 10, 64)
	if fs.NArg() != 1 || err != nil || id == 0 {
		return usageError{errors.New("want one broker id")}
	}
	a, err := af.client()
	if err != nil {
		return err
	}
	p, err := adminCall(ctx, a, af.addr, http.MethodPost, fmt.Sprintf("/v1/brokers/%d/%s", id, action))
	if err != nil {
		return fmt.Errorf("%s broker %d: %w", action, id, err)
	}
	printProgress(e, p)
	for wait && !p.Removable {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		next, err := adminCall(ctx, a, af.addr, http.MethodGet, fmt.Sprintf("/v1/brokers/%d", id))
		if err != nil {
			return err
		}
		if next != p {
			printProgress(e, next)
		}
		p = next
	}
	return nil
}

func printProgress(e *env, p broker.BrokerProgress) {
	switch {
	case p.Removed:
		fmt.Fprintf(e.stdout, "broker %d removed\n", p.ID)
	case p.Removable:
		fmt.Fprintf(e.stdout, "broker %d holds no replica: it may be stopped and removed (raftq cluster remove %d)\n", p.ID, p.ID)
	case p.Decommissioned:
		fmt.Fprintf(e.stdout, "broker %d decommissioning: %s left, %d moving\n", p.ID, count(p.Replicas, "replica"), p.Moving)
	default:
		fmt.Fprintf(e.stdout, "broker %d in service: %s\n", p.ID, count(p.Replicas, "replica"))
	}
}

// adminCall sends method to path on the admin listener at addr and
// decodes its BrokerProgress, or the error it answered.
func adminCall(ctx context.Context, a *adminClient, addr, method, path string) (broker.BrokerProgress, error) {
	var p broker.BrokerProgress
	return p, a.do(ctx, addr, method, path, 15*time.Second, &p)
}
