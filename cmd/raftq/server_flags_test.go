package main

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
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
		cfg, err := serverConfig(t, tc.args)
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
		cfg, err := serverConfig(t, tc.args)
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

// TestServerFlags_BrokerConfigs: --config-file's broker configs reach
// broker.Config, --override wins over them, and a file that cannot be
// read, a Kafka setting raftq takes as a flag, an unknown name, a bad
// value or a malformed override is a usage error that names it.
func TestServerFlags_BrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.properties", "# Kafka's comment\n! and the other kind\nlog.retention.hours = 24\nlog.cleanup.policy: compact,\\\n    delete\nlog.segment.bytes 1048576\n")
	for _, tc := range []struct {
		args []string
		want map[string]string
		bad  string
	}{
		{nil, map[string]string{}, ""},
		{[]string{"--config-file", good}, map[string]string{"log.retention.hours": "24", "log.cleanup.policy": "compact,delete", "log.segment.bytes": "1048576"}, ""},
		{[]string{"--config-file", good, "--override", "log.retention.hours=1", "--override", "min.insync.replicas=2"},
			map[string]string{"log.retention.hours": "1", "log.cleanup.policy": "compact,delete", "log.segment.bytes": "1048576", "min.insync.replicas": "2"}, ""},
		{[]string{"--config-file", filepath.Join(dir, "missing")}, nil, "--config-file: open"},
		{[]string{"--config-file", write("kafka.properties", "log.retention.hours=1\nlog.dirs=/var/kafka\n")}, nil, "kafka.properties:2: log.dirs is set by raftq's --data-dir flag"},
		{[]string{"--override", "log.retension.hours=1"}, nil, "unknown broker config log.retension.hours"},
		{[]string{"--override", "log.retention.hours=soon"}, nil, "broker config log.retention.hours=soon: not an int"},
		{[]string{"--override", "log.retention.hours"}, nil, `--override "log.retention.hours": want key=value`},
		{[]string{"--override", "num.partitions=3"}, nil, "num.partitions is set by raftq's --default-partitions flag"},
	} {
		cfg, err := serverConfig(t, tc.args)
		var ue usageError
		switch {
		case tc.bad != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: err %v, want a usage error with %q", tc.args, err, tc.bad)
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.bad == "" && !maps.Equal(cfg.BrokerConfigs, tc.want):
			t.Errorf("%v: broker configs %v, want %v", tc.args, cfg.BrokerConfigs, tc.want)
		}
	}
}

// parseProperties reads what Java's Properties.load reads: separators
// '=', ':' or space with space around them, comment lines, continued
// lines, escapes; the last of a repeated key wins when they are applied.
func TestParseProperties(t *testing.T) {
	got, err := parseProperties("a=1\r\n  b : two words \n#c=3\n\nd\\=e\\:f = \\u0041\\tx\ng \\\n  h\\\\\nlast")
	if err != nil {
		t.Fatal(err)
	}
	want := []property{{1, "a", "1"}, {2, "b", "two words "}, {5, "d=e:f", "A\tx"}, {6, "g", `h\`}, {8, "last", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if _, err := parseProperties("ok=1\nbad=\\u00zz"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad escape: %v, want an error naming line 2", err)
	}
}

// serverConfig is the broker.Config raftq server makes of args, or its
// refusal; args that do not parse fail the test.
func serverConfig(t *testing.T, args []string) (broker.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := bindServerFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.config(slog.New(slog.DiscardHandler))
}
