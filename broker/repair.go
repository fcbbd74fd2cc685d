package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
)

// A raft replica whose log recovery cut below its checkpoint (damaged
// batches that raft, compacted behind its snapshot, no longer holds:
// partition.GapError) refills the hole from another replica before it
// joins its raft group, over the peer transport's fetch stream, which
// ISR followers use too. A repair request is told from an ISR fetch by
// its first two bytes: ISR messages start with their version (15).
//
//	request:  repairMagic u16, group u64, from i64, upTo i64, maxBytes u32
//	response: code u8, then the batches (repairOK) or a reason
const (
	repairMagic    uint16 = 0xfe01
	repairReqSize         = 2 + 8 + 8 + 8 + 4
	repairMaxBytes        = 1 << 20
	// repairCallTimeout bounds one fetch; repairTimeout a whole repair
	// (reconcile retries an offline replica later).
	repairCallTimeout = 5 * time.Second
	repairTimeout     = 60 * time.Second
)

const (
	repairOK     byte = iota
	repairNoCopy      // no raft replica of that group here
	repairBehind      // this replica has not applied that far
	repairFailed      // the read failed: the reason follows
)

func isRepairRequest(b []byte) bool {
	return len(b) == repairReqSize && binary.BigEndian.Uint16(b) == repairMagic
}

func encodeRepairRequest(gid uint64, from, upTo int64, maxBytes int) []byte {
	b := binary.BigEndian.AppendUint16(nil, repairMagic)
	b = binary.BigEndian.AppendUint64(b, gid)
	b = binary.BigEndian.AppendUint64(b, uint64(from))
	b = binary.BigEndian.AppendUint64(b, uint64(upTo))
	return binary.BigEndian.AppendUint32(b, uint32(maxBytes))
}

// serveRepair answers a repair request from this node's replica of the
// group: whole batches from from, none reaching upTo or this replica's
// own high watermark (what it applied, which is committed).
func (n *Node) serveRepair(b []byte) []byte {
	gid := binary.BigEndian.Uint64(b[2:])
	from, upTo := int64(binary.BigEndian.Uint64(b[10:])), int64(binary.BigEndian.Uint64(b[18:]))
	maxBytes := int(min(binary.BigEndian.Uint32(b[26:]), repairMaxBytes))
	r := n.replicaByGroup(gid)
	if r == nil || r.data == nil {
		return []byte{repairNoCopy}
	}
	if _, ok := r.data.repl.(*raftReplication); !ok {
		return []byte{repairNoCopy}
	}
	l := r.data.repl.Log()
	limit := min(upTo, l.HighWatermark())
	if from >= limit {
		return []byte{repairBehind}
	}
	out, err := l.Read(from, maxBytes, limit)
	if err != nil {
		return append([]byte{repairFailed}, err.Error()...)
	}
	return append([]byte{repairOK}, out...)
}

var errRepairBehind = errors.New("broker: the replica has not applied that far")

// fetchRepair asks node to for batches of group gid in [from, upTo).
func (n *Node) fetchRepair(ctx context.Context, to, gid uint64, from, upTo int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, repairCallTimeout)
	defer cancel()
	b, err := n.peer.Fetch(ctx, to, encodeRepairRequest(gid, from, upTo, repairMaxBytes))
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("broker: empty repair answer")
	}
	switch b[0] {
	case repairOK:
		return b[1:], nil
	case repairNoCopy:
		return nil, errors.New("broker: no raft replica there")
	case repairBehind:
		return nil, errRepairBehind
	}
	return nil, fmt.Errorf("broker: repair read: %s", b[1:])
}

// fillFromPeers refills the hole gap names from the partition's other
// replicas, one after another until one has it all.
func (n *Node) fillFromPeers(ref coordinator.PartitionRef, cfg partition.ReplicaConfig, gap *partition.GapError) error {
	ctx, cancel := context.WithTimeout(n.ctx, repairTimeout)
	defer cancel()
	gid := ref.Partition.Group
	var errs []error
	for _, peer := range ref.Partition.Replicas {
		if peer == n.cfg.NodeID {
			continue
		}
		fetch := func(from, upTo int64) ([]byte, error) { return n.fetchRepair(ctx, peer, gid, from, upTo) }
		copied, err := partition.FillReplica(cfg, fetch)
		if err == nil {
			n.log.Warn("repaired a damaged partition log from a peer", "topic", ref.Topic.Name, "partition", ref.Partition.Index,
				"from_node", peer, "offsets", fmt.Sprintf("[%d, %d)", gap.End, gap.Next), "bytes", copied)
			return nil
		}
		errs = append(errs, fmt.Errorf("from node %d: %w", peer, err))
	}
	return fmt.Errorf("repair [%d, %d): %w", gap.End, gap.Next, errors.Join(errs...))
}
