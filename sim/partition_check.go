package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/raftq/raftq/partition"
)

// partChecker holds the Kafka invariants of the partition groups:
//   - every replica's log holds the same bytes at the same offsets (checked
//     at each append, against the first replica to append there, and at
//     the end, whole logs against each other);
//   - the high watermark a serving replica shows never goes backwards,
//     across its restarts too;
//   - no acknowledged batch is lost: at the end every replica holds it at
//     the offsets its acknowledgement gave;
//   - a retried idempotent batch never gets two offsets: every
//     acknowledgement of one (producer, sequence) names the same offsets,
//     and no batch's payload sits twice in a log.
type partChecker struct {
	c       *checker
	at      map[uint64]map[int64]string // group -> base offset -> batch bytes
	served  map[[2]uint64]int64         // (node, group) -> highest HW served
	acks    map[ackKey]ackedBatch
	appends int
}

type ackKey struct {
	group uint64
	pid   int64
	seq   int32 // plain batches: a unique negative number per ack
}

type ackedBatch struct {
	base, last int64
	payload    string
}

func newPartChecker(c *checker) *partChecker {
	return &partChecker{c: c, at: map[uint64]map[int64]string{}, served: map[[2]uint64]int64{}, acks: map[ackKey]ackedBatch{}}
}

func (p *partChecker) onAppend(node, group uint64, b batchAt) {
	p.appends++
	g := p.at[group]
	if g == nil {
		g = map[int64]string{}
		p.at[group] = g
	}
	if prev, ok := g[b.base]; ok && prev != b.bytes {
		p.c.fail("partition %d: node %d appended different bytes at offset %d (%d bytes, %d before)", group, node, b.base, len(b.bytes), len(prev))
		return
	}
	g[b.base] = b.bytes
}

func (p *partChecker) onServe(node, group uint64, hw int64) {
	k := [2]uint64{node, group}
	if prev, ok := p.served[k]; ok && hw < prev {
		p.c.fail("partition %d: node %d served high watermark %d after %d (went backwards)", group, node, hw, prev)
	}
	p.served[k] = max(p.served[k], hw)
}

func (p *partChecker) onAck(group uint64, pid int64, seq int32, res *partition.ProduceResult, payload string) {
	k := ackKey{group, pid, seq}
	if pid < 0 {
		k.seq = -int32(len(p.acks)) - 1
	}
	a := ackedBatch{base: res.Base, last: res.Last, payload: payload}
	if prev, ok := p.acks[k]; ok && (prev.base != a.base || prev.last != a.last) {
		p.c.fail("partition %d producer %d seq %d: a retry got offsets [%d, %d], the first ack [%d, %d]", group, pid, seq, a.base, a.last, prev.base, prev.last)
	}
	p.acks[k] = a
}

// final checks one partition's logs, one per replica, after convergence.
func (p *partChecker) final(group uint64, logs map[uint64][]batchAt) {
	nodes := slices.Sorted(maps.Keys(logs))
	if len(nodes) == 0 {
		return
	}
	ref := logs[nodes[0]]
	for _, n := range nodes[1:] {
		if !slices.Equal(logs[n], ref) {
			p.c.fail("partition %d: node %d's log differs from node %d's: %s", group, n, nodes[0], firstBatchDiff(logs[n], ref))
		}
	}
	for _, n := range nodes {
		p.checkLog(group, n, logs[n])
	}
}

func (p *partChecker) checkLog(group, node uint64, log []batchAt) {
	byBase := map[int64]string{}
	seen := map[string]int64{}
	for _, b := range log {
		byBase[b.base] = b.bytes
		pl := payload([]byte(b.bytes))
		if prev, ok := seen[pl]; ok {
			p.c.fail("partition %d node %d: one batch at offsets %d and %d (a retry appended twice)", group, node, prev, b.base)
		}
		seen[pl] = b.base
	}
	for k, a := range p.acks {
		if k.group != group {
			continue
		}
		got, ok := byBase[a.base]
		if !ok || payload([]byte(got)) != a.payload {
			p.c.fail("partition %d node %d: acknowledged batch [%d, %d] of producer %d lost", group, node, a.base, a.last, k.pid)
		}
	}
}

// firstByteDiff names the first byte two batches of the same length
// differ at, and the header field it lies in.
func firstByteDiff(a, b string) string {
	if len(a) != len(b) {
		return ""
	}
	for i := range len(a) {
		if a[i] != b[i] {
			return fmt.Sprintf(", first at byte %d (%s)", i, batchField(i))
		}
	}
	return ""
}

// batchField names the v2 batch header field holding byte i.
func batchField(i int) string {
	switch {
	case i < 8:
		return "base offset"
	case i < 12:
		return "length"
	case i < 16:
		return "partition leader epoch"
	case i < 17:
		return "magic"
	case i < 21:
		return "crc"
	}
	return "under the crc"
}

func firstBatchDiff(a, b []batchAt) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("batch %d: offset %d (%d bytes) vs offset %d (%d bytes)%s", i, a[i].base, len(a[i].bytes), b[i].base, len(b[i].bytes), firstByteDiff(a[i].bytes, b[i].bytes))
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d batches)", len(a), len(b))
}
