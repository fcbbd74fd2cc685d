package main

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestServerFlags_WAL: --wal picks the raft log layout; anything else is a
// usage error naming the flag.
func TestServerFlags_WAL(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		shared bool
		bad    bool
		async  bool
	}{
		{nil, true, false, false},
		{[]string{"--wal", "shared"}, true, false, false},
		{[]string{"--wal", "group"}, false, false, false},
		{[]string{"--wal", "per-node"}, false, true, false},
		{[]string{"--async-writes"}, true, false, true},
		{[]string{"--wal", "group", "--async-writes=true"}, false, false, true},
	} {
		fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bindServerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		var ue usageError
		switch {
		case tc.bad && !errors.As(err, &ue):
			t.Errorf("%v: err %v, want a usage error", tc.args, err)
		case !tc.bad && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !tc.bad && cfg.SharedWAL != tc.shared:
			t.Errorf("%v: SharedWAL %v, want %v", tc.args, cfg.SharedWAL, tc.shared)
		case !tc.bad && cfg.AsyncStorageWrites != tc.async:
			t.Errorf("%v: AsyncStorageWrites %v, want %v", tc.args, cfg.AsyncStorageWrites, tc.async)
		}
	}
}

// TestServerFlags_Replication: the ISR flags reach broker.Config with
// Kafka's defaults, and a duration that is not positive is a usage error.
func TestServerFlags_Replication(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		lag, wait time.Duration
		elr       bool
		bad       bool
	}{
		{nil, 30 * time.Second, 500 * time.Millisecond, false, false},
		{[]string{"--replica-lag-time-max", "10s", "--replica-fetch-wait-max", "50ms", "--eligible-leader-replicas"}, 10 * time.Second, 50 * time.Millisecond, true, false},
		{[]string{"--replica-lag-time-max", "0s"}, 0, 0, false, true},
		{[]string{"--replica-fetch-wait-max", "-1s"}, 0, 0, false, true},
	} {
		fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bindServerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		var ue usageError
		switch {
		case tc.bad && !errors.As(err, &ue):
			t.Errorf("%v: err %v, want a usage error", tc.args, err)
		case !tc.bad && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !tc.bad && (cfg.ReplicaLagTimeMax != tc.lag || cfg.ReplicaFetchWaitMax != tc.wait || cfg.EligibleLeaderReplicas != tc.elr):
			t.Errorf("%v: lag %s wait %s elr %v, want %s %s %v", tc.args, cfg.ReplicaLagTimeMax, cfg.ReplicaFetchWaitMax, cfg.EligibleLeaderReplicas, tc.lag, tc.wait, tc.elr)
		}
	}
}
