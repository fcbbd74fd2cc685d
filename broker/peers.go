package broker

import (
	"context"

	"github.com/raftq/raftq/coordinator"
)

// peersLoop keeps the peer transport in step with the metadata: on every
// change, every node whose peer address the state holds (admitted or
// registered, coordinator.State.PeerAddrs) and the transport lacks, or
// holds under another address, is added. So nodes that join at run time
// become peers of every node without a restart, and a node that comes
// back on a new address is dialled there. A removed broker
// (coordinator.State.Removed) whose address the state no longer holds is
// dropped from the transport: its queue, connections and streams close,
// and it is refused until it is admitted again.
func (n *Node) peersLoop(ctx context.Context) {
	for {
		changed := n.meta.Changed()
		n.syncPeers(n.meta.View())
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (n *Node) syncPeers(st *coordinator.State) {
	have, addrs := n.peer.Peers(), st.PeerAddrs()
	for id, addr := range addrs {
		if id == n.cfg.NodeID || have[id] == addr {
			continue
		}
		n.log.Info("peer address from the metadata", "peer", id, "addr", addr, "was", have[id])
		n.peer.AddPeer(id, addr)
	}
	for _, id := range st.Removed {
		if _, ok := have[id]; ok && addrs[id] == "" && id != n.cfg.NodeID {
			n.log.Info("removed broker dropped from the peer transport", "peer", id)
			n.peer.RemovePeer(id)
		}
	}
}

// hasPeer reports whether the transport knows node id's address.
func (n *Node) hasPeer(id uint64) bool {
	_, ok := n.peer.PeerStats(id)
	return ok
}
