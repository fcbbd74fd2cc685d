package broker

import (
	"testing"

	"github.com/raftq/raftq/coordinator"
)

// A non-preferred replica of a new group holds its election for the
// preferred one only while the metadata knows that broker alive: holding
// for a broker marked down would only delay the partition's first leader.
func TestElectionHold(t *testing.T) {
	view := &coordinator.State{Brokers: map[uint64]*coordinator.Broker{
		1: {Alive: true}, 2: {Alive: false}, 3: {Alive: true},
	}}
	for _, c := range []struct {
		name     string
		replicas []uint64
		self     uint64
		want     int
	}{
		{"preferred alive, this node another replica", []uint64{1, 2, 3}, 3, 20},
		{"this node preferred", []uint64{1, 2, 3}, 1, 0},
		{"preferred marked down", []uint64{2, 1, 3}, 1, 0},
		{"preferred unknown to the metadata", []uint64{9, 1, 3}, 1, 0},
		{"no replicas", nil, 1, 0},
	} {
		if got := electionHold(view, c.replicas, c.self, 10); got != c.want {
			t.Errorf("%s: hold %d ticks, want %d", c.name, got, c.want)
		}
	}
}

// Every value the coordinator accepts for a topic gives a log config the
// partition accepts: a replica never fails to open, or to take altered
// configs, because of one.
func TestLogConfig_AcceptedValuesAreValid(t *testing.T) {
	extremes := map[string][]string{
		"segment.bytes":        {"61", "1024", "9223372036854775807"},
		"segment.ms":           {"1", "9223372036854775807"},
		"retention.ms":         {"-1", "0", "9223372036854775807"},
		"retention.bytes":      {"-1", "0", "9223372036854775807"},
		"index.interval.bytes": {"0", "9223372036854775807"},
	}
	for key, vals := range extremes {
		for _, v := range vals {
			cfgs := map[string]string{key: v}
			if err := coordinator.ValidateTopicConfigs(cfgs); err != nil {
				t.Errorf("%s=%s refused by the coordinator: %v", key, v, err)
				continue
			}
			if err := logConfig(&coordinator.Topic{Configs: cfgs}).Validate(); err != nil {
				t.Errorf("%s=%s: the coordinator accepts it but the log does not: %v", key, v, err)
			}
		}
	}
	if err := coordinator.ValidateTopicConfigs(map[string]string{"segment.bytes": "60"}); err == nil {
		t.Error("segment.bytes=60, too small for a batch header, was accepted")
	}
}
