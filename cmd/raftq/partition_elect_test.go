package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/internal/logging"
)

func TestParseElectTargets(t *testing.T) {
	got, err := parseElectTargets([]string{"a/1", "b", "a/0", "b/3", "c/2"})
	want := map[string][]int32{"a": {1, 0}, "b": nil, "c": {2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %v, %v; want %v (a topic named whole stays whole)", got, err, want)
	}
	for _, bad := range []string{"/1", "a/", "a/x", "a/-1"} {
		var ue usageError
		if _, err := parseElectTargets([]string{bad}); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

func TestMaintenanceArgs(t *testing.T) {
	if id, on, err := maintenanceArgs([]string{"3", "on"}); id != 3 || !on || err != nil {
		t.Errorf("3 on: %d %v %v", id, on, err)
	}
	if id, on, err := maintenanceArgs([]string{"2", "off"}); id != 2 || on || err != nil {
		t.Errorf("2 off: %d %v %v", id, on, err)
	}
	for _, bad := range [][]string{nil, {"3"}, {"0", "on"}, {"x", "on"}, {"3", "yes"}, {"3", "on", "now"}} {
		var ue usageError
		if _, _, err := maintenanceArgs(bad); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

// One row per partition, in order, with the code's name and the
// broker's message; ELECTION_NOT_NEEDED is no failure, any other error
// is.
func TestPrintElections(t *testing.T) {
	e, stdout, _ := bufferedEnv(nil)
	res := kadm.ElectLeadersResults{
		"t": {
			1: {Topic: "t", Partition: 1, Err: kerr.ElectionNotNeeded, ErrMessage: "preferred replica 2 leads already"},
			0: {Topic: "t", Partition: 0},
		},
	}
	if err := printElections(e, res, false); err != nil {
		t.Errorf("elected and not needed: %v, want no failure", err)
	}
	want := []string{"TOPIC PARTITION RESULT", "t 0 elected", "t 1 ELECTION_NOT_NEEDED: preferred replica 2 leads already"}
	if got := fieldsOf(stdout.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("printed %q, want %q", got, want)
	}
	e, _, _ = bufferedEnv(nil)
	res["u"] = map[int32]kadm.ElectLeadersResult{0: {Topic: "u", Err: kerr.PreferredLeaderNotAvailable}}
	if err := printElections(e, res, false); err == nil || !strings.Contains(err.Error(), "1 election of 3 failed") {
		t.Errorf("with one failure: %v", err)
	}
	e, stdout, _ = bufferedEnv(nil)
	if err := printElections(e, nil, true); err != nil || !strings.Contains(stdout.String(), "no partition needed an election") {
		t.Errorf("nothing to elect with --all: %v %q", err, stdout.String())
	}
}

// fieldsOf is each non-empty line of s with its fields single-spaced.
func fieldsOf(s string) []string {
	var out []string
	for _, l := range lines(s) {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

func TestPrintMaintenance(t *testing.T) {
	var stdout logging.Buffer
	e := &env{stdout: &stdout}
	seed := broker.Status{Brokers: []broker.BrokerStatus{{ID: 1}, {ID: 2, Maintenance: true}, {ID: 3}}}
	leader := func(role string) broker.PartitionStatus {
		return broker.PartitionStatus{GroupStatus: broker.GroupStatus{Role: role}}
	}
	statuses := map[uint64]*broker.Status{
		1: {Partitions: []broker.PartitionStatus{leader("leader"), leader("follower"), leader("leader")}, Metadata: broker.GroupStatus{Role: "leader"}},
		2: {Partitions: []broker.PartitionStatus{leader("follower")}, Metadata: broker.GroupStatus{Role: "follower"}},
	}
	printMaintenance(e, seed, statuses)
	want := []string{"NODE MAINTENANCE LEADS PARTITIONS LEADS METADATA", "1 off 2 yes", "2 on 0 no", "3 off - -"}
	if got := fieldsOf(stdout.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("printed %q, want %q", got, want)
	}
}
