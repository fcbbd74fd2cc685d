package sim

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	"github.com/raftq/raftq/coordinator/groups"
)

// offsetChecker holds the offsets invariant of the offsets groups: a
// committed offset never goes backwards without a reset. Per replica
// incarnation, across its applies, every (consumer group, partition)
// offset after an entry is at least the one before it, and still there,
// unless the entry is an explicit reset: OffsetDelete (DeleteOffsets),
// DeleteGroups, expiry (Expire), or a simple commit (generation -1, no
// member), which is how kafka-consumer-groups --reset-offsets moves a
// group's offsets. A restarted replica starts again from its snapshot,
// whose state stateChecker holds to the others' at its index; so do the
// states after every apply, so the sequence is the same on every replica.
type offsetChecker struct {
	c      *checker
	last   map[[2]uint64]map[offKey]int64 // (node, group) -> offsets after its last apply
	failed map[uint64]bool                // groups already reported
}

// offKey names one committed offset of an offsets group.
type offKey struct {
	group string
	tp    groups.TopicPartition
}

func (k offKey) compare(o offKey) int {
	if c := strings.Compare(k.group, o.group); c != 0 {
		return c
	}
	if c := strings.Compare(k.tp.Topic, o.tp.Topic); c != 0 {
		return c
	}
	return int(k.tp.Partition - o.tp.Partition)
}

func newOffsetChecker(c *checker) *offsetChecker {
	return &offsetChecker{c: c, last: map[[2]uint64]map[offKey]int64{}, failed: map[uint64]bool{}}
}

func (oc *offsetChecker) onOpen(node, group uint64) {
	oc.last[[2]uint64{node, group}] = map[offKey]int64{}
}

func (oc *offsetChecker) onRestore(node, group uint64, offs map[offKey]int64) {
	oc.last[[2]uint64{node, group}] = offs
}

func (oc *offsetChecker) onApply(node, group uint64, p pos, offs map[offKey]int64, reset bool) {
	k := [2]uint64{node, group}
	prev := oc.last[k]
	oc.last[k] = offs
	if reset || oc.failed[group] {
		return
	}
	for _, key := range slices.SortedFunc(maps.Keys(prev), offKey.compare) {
		now, ok := offs[key]
		switch {
		case !ok:
			oc.fail(group, "offsets group %d node %d: group %q lost its offset %d of %s/%d at entry %v, which is no reset",
				group, node, key.group, prev[key], key.tp.Topic, key.tp.Partition, p)
		case now < prev[key]:
			oc.fail(group, "offsets group %d node %d: group %q's offset of %s/%d went backwards, %d to %d, at entry %v, which is no reset",
				group, node, key.group, key.tp.Topic, key.tp.Partition, prev[key], now, p)
		}
	}
}

func (oc *offsetChecker) fail(group uint64, format string, args ...any) {
	oc.failed[group] = true
	oc.c.fail(format, args...)
}

// offsetsOf reads every committed offset of m.
func offsetsOf(m *groups.Machine) map[offKey]int64 {
	out := map[offKey]int64{}
	for _, g := range m.Groups() {
		for tp, o := range m.Offsets(g.Name) {
			out[offKey{g.Name, tp}] = o.Offset
		}
	}
	return out
}

// commandKey is the JSON key of a group command as Command.Encode frames
// it ('G', then the one field set: "commit", "expire", ...), without
// decoding it; "" for anything else.
func commandKey(data []byte) string {
	rest, ok := bytes.CutPrefix(data, []byte(`G{"`))
	if !ok {
		return ""
	}
	if i := bytes.IndexByte(rest, '"'); i >= 0 {
		return string(rest[:i])
	}
	return ""
}

// isSimpleCommit reports whether c is a simple commit (generation -1, no
// member): the resets of kafka-consumer-groups --reset-offsets.
func isSimpleCommit(c *groups.Commit) bool {
	return c != nil && c.Generation < 0 && c.MemberID == "" && c.InstanceID == ""
}
