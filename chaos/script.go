package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Roles of one partition's nodes that a script's steps may name instead
// of node ids. They are resolved once, when the first step that names a
// role starts, from one look at the cluster (Env.Roles), and stay bound
// for the rest of the script: "the leader" of a later step is the node
// that led when the script began to use roles, even if it no longer does.
const (
	RoleLeader         = "leader"          // the partition's leader
	RoleFollowers      = "followers"       // its other replicas
	RoleReplicas       = "replicas"        // leader and followers
	RoleOthers         = "others"          // nodes that hold no replica of it
	RoleMetadataLeader = "metadata-leader" // the metadata group's leader
)

var knownRoles = []string{RoleLeader, RoleFollowers, RoleReplicas, RoleOthers, RoleMetadataLeader}

// Partition choices of a script (Script.Partition), besides a number.
const (
	// PartitionAwayFromMetadataLeader picks a partition of which the
	// metadata leader holds no replica, so that a cut among the
	// partition's replicas leaves the metadata leader's view of each of
	// them intact (the ISR controller judges liveness from there).
	PartitionAwayFromMetadataLeader = "away-from-metadata-leader"
)

// ShapeCuts is the partition shape of a script's step: explicit cuts.
const ShapeCuts Shape = "cuts"

// Cut says who cannot reach whom: traffic from every node of From to
// every node of To is dropped, and, unless OneWay, from To to From too.
// Entries are node ids ("3") or roles.
type Cut struct {
	From   []string `json:"from"`
	To     []string `json:"to"`
	OneWay bool     `json:"one_way,omitempty"`
}

// String reads "[followers] -x- [leader]" (both ways) or
// "[followers] -x> [leader]" (one way).
func (c Cut) String() string {
	arrow := "-x-"
	if c.OneWay {
		arrow = "-x>"
	}
	return fmt.Sprintf("%v %s %v", c.From, arrow, c.To)
}

// ScriptDuration is a time.Duration written as a Go duration string in
// JSON ("2s", "1m30s").
type ScriptDuration time.Duration

// UnmarshalJSON reads a duration string.
func (d *ScriptDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("chaos: duration %s: want a string such as \"5s\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("chaos: duration %q: %w", s, err)
	}
	*d = ScriptDuration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d ScriptDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ScriptStep is one fault of a script: a kind, when it starts and stops
// (offsets from the run's start), and what it hits.
type ScriptStep struct {
	Kind  Kind           `json:"kind"`
	Start ScriptDuration `json:"start"`
	Stop  ScriptDuration `json:"stop"`
	// Nodes are the nodes a kill, pause or lose-unfsynced hits: ids or
	// roles.
	Nodes []string `json:"nodes,omitempty"`
	// Cuts make a partition's grudge.
	Cuts []Cut `json:"cuts,omitempty"`
	// Note says what the step is for, for people.
	Note string `json:"note,omitempty"`
}

// Script is a hand-written fault schedule, read from JSON with
// ReadScript: faults with explicit targets and grudges, for scenarios a
// random schedule almost never produces. See ReadScript for the format.
type Script struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// MinNodes is the smallest cluster the script makes sense on.
	MinNodes int `json:"min_nodes,omitempty"`
	// Partition is the partition whose roles the steps name: a number,
	// or PartitionAwayFromMetadataLeader (the default when roles are
	// used).
	Partition string       `json:"partition,omitempty"`
	Steps     []ScriptStep `json:"steps"`
}

// ReadScript reads and checks a script:
//
//	{
//	  "name": "last-replica-standing",
//	  "description": "...",
//	  "min_nodes": 5,
//	  "partition": "away-from-metadata-leader",
//	  "steps": [
//	    {"kind": "partition", "start": "3s", "stop": "28s",
//	     "cuts": [{"from": ["followers"], "to": ["leader"]}]},
//	    {"kind": "lose-unfsynced", "start": "20s", "stop": "32s", "nodes": ["leader"]}
//	  ]
//	}
//
// Kinds are kill, pause, partition and lose-unfsynced; membership and
// corrupt run only from a random schedule (both ErrUnsupported). Unknown fields are
// errors, so a misspelt key does not silently change the scenario.
func ReadScript(r io.Reader) (Script, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("chaos: read script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// ParseScript is ReadScript of b.
func ParseScript(b []byte) (Script, error) { return ReadScript(bytes.NewReader(b)) }

// Validate checks what does not depend on the cluster: a name, known
// kinds, roles and partition, node ids that are numbers, a target for
// each fault, and the schedule rules (one kind never overlaps itself).
func (s Script) Validate() error {
	if s.Name == "" {
		return errors.New("chaos: script needs a name")
	}
	if _, err := s.partition(); err != nil {
		return err
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("chaos: script %s step %d: %w", s.Name, i, err)
		}
	}
	_, err := s.faults()
	return err
}

func (s Script) partition() (string, error) {
	if s.Partition == "" || s.Partition == PartitionAwayFromMetadataLeader {
		return PartitionAwayFromMetadataLeader, nil
	}
	if n, err := strconv.Atoi(s.Partition); err != nil || n < 0 {
		return "", fmt.Errorf("chaos: script %s: partition %q: want a number or %q", s.Name, s.Partition, PartitionAwayFromMetadataLeader)
	}
	return s.Partition, nil
}

func (st ScriptStep) validate() error {
	switch st.Kind {
	case KindKill, KindPause, KindLoseUnfsynced:
		if len(st.Nodes) == 0 || len(st.Cuts) > 0 {
			return fmt.Errorf("%s needs nodes and no cuts", st.Kind)
		}
		return checkSelectors(st.Nodes)
	case KindPartition:
		if len(st.Cuts) == 0 || len(st.Nodes) > 0 {
			return errors.New("partition needs cuts and no nodes")
		}
		for _, c := range st.Cuts {
			if len(c.From) == 0 || len(c.To) == 0 {
				return errors.New("a cut needs from and to")
			}
			if err := checkSelectors(append(slices.Clone(c.From), c.To...)); err != nil {
				return err
			}
		}
		return nil
	case KindMembership:
		return fmt.Errorf("%w: %s in a script (it runs from a random schedule, --nemesis membership)", ErrUnsupported, st.Kind)
	case KindCorrupt:
		return fmt.Errorf("%w: %s in a script (it runs from a random schedule, --nemesis corrupt)", ErrUnsupported, st.Kind)
	}
	return fmt.Errorf("unknown kind %q", st.Kind)
}

// checkSelectors accepts node ids and known roles.
func checkSelectors(sel []string) error {
	for _, x := range sel {
		if slices.Contains(knownRoles, x) {
			continue
		}
		if n, err := strconv.Atoi(x); err != nil || n < 1 {
			return fmt.Errorf("%q is neither a node id nor a role (%s)", x, strings.Join(knownRoles, ", "))
		}
	}
	return nil
}

// faults turns the steps into faults ordered by start.
func (s Script) faults() ([]Fault, error) {
	var out []Fault
	for _, st := range s.Steps {
		f := Fault{Kind: st.Kind, Start: time.Duration(st.Start), Stop: time.Duration(st.Stop), Select: st.Nodes, Cuts: st.Cuts, Note: st.Note}
		if st.Kind == KindPartition {
			f.Shape = ShapeCuts
		} else {
			f.Target = TargetScript
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	for i := range out {
		out[i].ID = i
	}
	if err := (Schedule{Faults: out}).Validate(); err != nil {
		return nil, fmt.Errorf("chaos: script %s: %w", s.Name, err)
	}
	return out, nil
}

// Schedule makes the script's schedule for a cluster of nodes: it checks
// the cluster is big enough and every node id named is one of nodes.
func (s Script) Schedule(nodes []int) (Schedule, error) {
	if err := s.Validate(); err != nil {
		return Schedule{}, err
	}
	if len(nodes) < s.MinNodes {
		return Schedule{}, fmt.Errorf("%w: script %s needs %d nodes, have %d", ErrTooFewNodes, s.Name, s.MinNodes, len(nodes))
	}
	faults, _ := s.faults()
	for _, f := range faults {
		sel := slices.Clone(f.Select)
		for _, c := range f.Cuts {
			sel = append(append(sel, c.From...), c.To...)
		}
		for _, x := range sel {
			if n, err := strconv.Atoi(x); err == nil && !slices.Contains(nodes, n) {
				return Schedule{}, fmt.Errorf("%w: script %s names node %d", ErrUnknownNode, s.Name, n)
			}
		}
	}
	part, _ := s.partition()
	return Schedule{Faults: faults, Script: s.Name, Partition: part}, nil
}

// End is when the script's last fault stops.
func (s Script) End() time.Duration {
	var end time.Duration
	for _, st := range s.Steps {
		end = max(end, time.Duration(st.Stop))
	}
	return end
}

// Kinds lists the kinds the script uses, in first-use order.
func (s Script) Kinds() []Kind {
	var out []Kind
	for _, st := range s.Steps {
		if !slices.Contains(out, st.Kind) {
			out = append(out, st.Kind)
		}
	}
	return out
}

// RoleMap is what Env.Roles reports: the nodes of each role, and which
// partition they are of.
type RoleMap struct {
	Partition string           // e.g. "jepsen/2"
	Nodes     map[string][]int // role -> nodes, sorted
}

// String lists the roles: "jepsen/2: leader [3] followers [1 5] ...".
func (r RoleMap) String() string {
	parts := []string{r.Partition + ":"}
	for _, role := range knownRoles {
		parts = append(parts, fmt.Sprintf("%s %v", role, r.Nodes[role]))
	}
	return strings.Join(parts, " ")
}

// resolve turns ids and roles into sorted, distinct node ids.
func (r RoleMap) resolve(sel []string) ([]int, error) {
	var out []int
	for _, x := range sel {
		if n, err := strconv.Atoi(x); err == nil {
			out = append(out, n)
			continue
		}
		nodes, ok := r.Nodes[x]
		if !ok || len(nodes) == 0 {
			return nil, fmt.Errorf("chaos: no node has role %s (%s)", x, r)
		}
		out = append(out, nodes...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// grudge turns cuts into a grudge.
func (r RoleMap) grudge(cuts []Cut) (Grudge, error) {
	g := Grudge{}
	for _, c := range cuts {
		from, err := r.resolve(c.From)
		if err != nil {
			return nil, err
		}
		to, err := r.resolve(c.To)
		if err != nil {
			return nil, err
		}
		g.drop(from, to)
		if !c.OneWay {
			g.drop(to, from)
		}
	}
	return g, nil
}

// drop adds "every node of to drops traffic from every node of from".
func (g Grudge) drop(from, to []int) {
	for _, t := range to {
		for _, f := range from {
			if f != t && !slices.Contains(g[t], f) {
				g[t] = append(g[t], f)
			}
		}
		slices.Sort(g[t])
	}
}

// needsRoles reports whether a selector names a role.
func needsRoles(sel []string) bool {
	for _, x := range sel {
		if _, err := strconv.Atoi(x); err != nil {
			return true
		}
	}
	return false
}
