package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/chaos/lazyfs"
)

// Setup is what a run ran against, written into results.json and printed
// as the `setup:` line, so that every published figure carries it. The
// topic settings are the effective ones: the value the run set with
// WorkloadConfig.TopicConfigs, else raftq's default (as
// coordinator/configs.go defines it; jepsen may not import coordinator).
type Setup struct {
	Mode              string `json:"mode"` // replication.mode: raft or isr
	Nodes             int    `json:"nodes"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	MinInsyncReplicas string `json:"min_insync_replicas"`
	// FlushMessages and FlushMs are the isr-mode flush configs; "never"
	// stands for Kafka's default of Long.MAX.
	FlushMessages string `json:"flush_messages"`
	FlushMs       string `json:"flush_ms"`
	// Fsync is the nodes' --fsync policy.
	Fsync   string `json:"fsync"`
	Unclean string `json:"unclean_leader_election"`
	// ELR says whether the nodes run with --eligible-leader-replicas.
	ELR        bool   `json:"eligible_leader_replicas"`
	Acks       string `json:"acks"`
	Idempotent bool   `json:"idempotent"`
	// Txn says the producers ran transactions (WorkloadConfig.Txn).
	Txn bool `json:"txn,omitempty"`
	// Nemesis lists the fault kinds of a random schedule, or "script:" and
	// the script's name; "none" for a run without faults.
	Nemesis []string `json:"nemesis"`
	// PowerTargets are the lose-unfsynced targets a random schedule drew
	// from.
	PowerTargets []string `json:"power_targets,omitempty"`
	// MembershipActions are the membership actions a random schedule
	// drew from.
	MembershipActions []string `json:"membership_actions,omitempty"`
	Seed              uint64   `json:"seed"`
	// Duration is how long the workload ran.
	Duration time.Duration `json:"duration_ns"`
	// LazyFS names the power-loss model: "off" (no lazyfs), "worst-case"
	// (a power loss drops everything not fsynced) or "writeback-<age>"
	// (pages dirty for longer than age were written back, as Linux's
	// flusher does; see chaos/lazyfs).
	LazyFS       string            `json:"lazyfs"`
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`
	ServerArgs   []string          `json:"server_args,omitempty"`
}

// Topic config defaults, as coordinator/configs.go defines them.
const (
	defaultMode       = "raft"
	defaultMinInsync  = "1"
	defaultUnclean    = "false"
	kafkaNeverFlush   = "9223372036854775807" // Long.MAX: flush.messages and flush.ms never fire
	elrFlag           = "--eligible-leader-replicas"
	lazyFSOff         = "off"
	setupNemesisNone  = "none"
	setupScriptPrefix = "script:"
)

// topicSetting returns the topic config k as the run set it, else def.
func topicSetting(cfgs map[string]string, k, def string) string {
	if v, ok := cfgs[k]; ok {
		return v
	}
	return def
}

func flushSetting(cfgs map[string]string, k string) string {
	if v := topicSetting(cfgs, k, kafkaNeverFlush); v != kafkaNeverFlush {
		return v
	}
	return "never"
}

// boolFlag reports whether args turn the boolean flag name on (pflag
// syntax: --name, --name=true; the last one given wins).
func boolFlag(args []string, name string) bool {
	on := false
	for _, a := range args {
		switch {
		case a == name:
			on = true
		case strings.HasPrefix(a, name+"="):
			v, err := strconv.ParseBool(strings.TrimPrefix(a, name+"="))
			on = err == nil && v
		}
	}
	return on
}

// lazyFSModel names the power-loss model of a run: "off" without lazyfs,
// else lazyfs's own name for it.
func lazyFSModel(lazy bool, writeback time.Duration) string {
	if !lazy {
		return lazyFSOff
	}
	return lazyfs.Config{WritebackAge: writeback}.Model()
}

// Map is the setup as key=value pairs, for the `setup:` line (the same
// shape as `raftq bench`'s): every field, and each topic config as
// topic.<name>.
func (s Setup) Map() map[string]string {
	m := map[string]string{
		"mode":                 s.Mode,
		"nodes":                strconv.Itoa(s.Nodes),
		"partitions":           strconv.Itoa(int(s.Partitions)),
		"rf":                   strconv.Itoa(int(s.ReplicationFactor)),
		"min.insync.replicas":  s.MinInsyncReplicas,
		"flush.messages":       s.FlushMessages,
		"flush.ms":             s.FlushMs,
		"fsync":                s.Fsync,
		"unclean":              s.Unclean,
		"elr":                  strconv.FormatBool(s.ELR),
		"acks":                 s.Acks,
		"idempotent":           strconv.FormatBool(s.Idempotent),
		"txn":                  txnSetting(s.Txn),
		"nemesis":              strings.Join(s.Nemesis, ","),
		"seed":                 strconv.FormatUint(s.Seed, 10),
		"time":                 s.Duration.String(),
		"lazyfs":               s.LazyFS,
		"server.args":          strings.Join(s.ServerArgs, " "),
		"lose-unfsynced.nodes": strings.Join(s.PowerTargets, ","),
		"membership.actions":   strings.Join(s.MembershipActions, ","),
	}
	for k, v := range s.TopicConfigs {
		m["topic."+k] = v
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// txnSetting shows txn=true on the setup line of txn runs only.
func txnSetting(on bool) string {
	if on {
		return "true"
	}
	return ""
}

// String is the setup's line, key=value pairs in key order.
func (s Setup) String() string {
	m := s.Map()
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if strings.ContainsAny(v, " \t") {
			v = fmt.Sprintf("%q", v)
		}
		kv = append(kv, k+"="+v)
	}
	return strings.Join(kv, " ")
}

// setup describes the run cfg makes; kinds are the schedule's, script the
// script's name when one drives the faults.
func (c RaftqConfig) setup() Setup {
	w := c.Run.Workload
	tc := w.TopicConfigs
	s := Setup{
		Mode:              topicSetting(tc, "replication.mode", defaultMode),
		Nodes:             c.Nodes,
		Partitions:        w.Partitions,
		ReplicationFactor: w.ReplicationFactor,
		MinInsyncReplicas: topicSetting(tc, "min.insync.replicas", defaultMinInsync),
		FlushMessages:     flushSetting(tc, "flush.messages"),
		FlushMs:           flushSetting(tc, "flush.ms"),
		Fsync:             c.Fsync,
		Unclean:           topicSetting(tc, "unclean.leader.election.enable", defaultUnclean),
		ELR:               boolFlag(c.ServerArgs, elrFlag),
		Acks:              w.Acks,
		Idempotent:        w.Idempotent,
		Txn:               w.Txn,
		Seed:              c.Schedule.Seed,
		Duration:          w.Duration,
		LazyFS:            lazyFSModel(c.lazyFS(), c.Writeback),
		TopicConfigs:      maps.Clone(tc),
		ServerArgs:        slices.Clone(c.ServerArgs),
	}
	switch {
	case c.Script != nil:
		s.Nemesis = []string{setupScriptPrefix + c.Script.Name}
	case len(c.Schedule.Kinds) == 0:
		s.Nemesis = []string{setupNemesisNone}
	default:
		for _, k := range c.Schedule.Kinds {
			s.Nemesis = append(s.Nemesis, string(k))
		}
	}
	if c.Script == nil && slices.Contains(c.Schedule.Kinds, chaos.KindLoseUnfsynced) {
		for _, t := range c.Schedule.PowerTargets {
			s.PowerTargets = append(s.PowerTargets, string(t))
		}
		if len(s.PowerTargets) == 0 {
			s.PowerTargets = []string{string(chaos.TargetAll)}
		}
	}
	if c.Script == nil && slices.Contains(c.Schedule.Kinds, chaos.KindMembership) {
		for _, a := range c.Schedule.Membership.Actions {
			s.MembershipActions = append(s.MembershipActions, string(a))
		}
	}
	return s
}
