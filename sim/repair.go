package sim

import (
	"errors"
	"fmt"

	"github.com/raftq/raftq/partition"
)

// repairFrom refills a replica whose recovery cut below its checkpoint
// (partition.GapError) from a peer, as the broker's fillFromPeers does
// over the peer fetch stream: whole batches below the peer's HW, from
// the first live peer in id order that the network lets n reach and
// that has applied that far.
func (s *Sim) repairFrom(n *node, g uint64, rc partition.ReplicaConfig, gap *partition.GapError) error {
	var errs []error
	for _, m := range s.nodes {
		if m.id == n.id || !m.up || s.net.cut[[2]uint64{n.id, m.id}] || s.net.cut[[2]uint64{m.id, n.id}] {
			continue
		}
		peer := m.parts[g]
		if peer == nil {
			continue
		}
		fetch := func(from, upTo int64) ([]byte, error) {
			l := peer.Log()
			limit := min(upTo, l.HighWatermark())
			if from >= limit {
				return nil, fmt.Errorf("node %d has applied only to %d", m.id, limit)
			}
			return l.Read(from, 1<<20, limit)
		}
		copied, err := partition.FillReplica(rc, fetch)
		if err == nil {
			s.res.Repairs++
			s.note("node %d partition %d: log cut to %d below its checkpoint's %d; %d bytes refilled from node %d", n.id, g, gap.End, gap.Next, copied, m.id)
			return nil
		}
		errs = append(errs, fmt.Errorf("from node %d: %w", m.id, err))
	}
	if len(errs) == 0 {
		return errors.New("no live, reachable peer holds the partition")
	}
	return errors.Join(errs...)
}
