package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
)

// sendTxnMarkers is the transaction coordinator's txns.Config.WriteMarkers:
// it sends WriteTxnMarkers (key 27) for txn, at coordinatorEpoch, to the
// Kafka listener of each of its partitions' leaders, one request per
// leader and all at once, as Kafka's TransactionMarkerChannelManager
// does, and returns the partitions whose leader wrote the marker. A
// partition whose topic (or index) is gone counts as written, as Kafka
// drops its markers. A partition without a live leader, a leader that
// answered an error or could not be reached, is left for the
// coordinator's next Tick. Leaders come from the metadata as Metadata
// answers them (this node's raft view where it hosts a replica, the
// leadership hints elsewhere).
//
// The transaction's groups get the marker too, as Kafka sends it: to the
// leader of __consumer_offsets partition PartitionFor(group, n), whose
// group coordinator commits or drops the group's transactional offsets
// (txn_markers.go) before answering. A group is done once its offsets
// partition answered NONE; with no __consumer_offsets topic at all no
// group holds offsets, and every group is done.
func (n *Node) sendTxnMarkers(ctx context.Context, txn txns.PendingTxn, coordinatorEpoch uint64) (txns.Partitions, []string, error) {
	done := txns.Partitions{}
	byLeader := map[string]txns.Partitions{}
	var errs []error
	st := n.meta.View()
	all, groupParts := markerTargets(st, txn)
	for _, topic := range all.Topics() {
		t := st.Topics[topic]
		for _, i := range all[topic] {
			if t == nil || int(i) >= len(t.Partitions) {
				done[topic] = append(done[topic], i)
				continue
			}
			leader, _ := n.leaderOf(&t.Partitions[i])
			addr := n.markerAddr(leader)
			if b := st.Brokers[leader]; b == nil || !b.Alive || addr == "" {
				errs = append(errs, fmt.Errorf("%s-%d has no live leader", topic, i))
				continue
			}
			if byLeader[addr] == nil {
				byLeader[addr] = txns.Partitions{}
			}
			byLeader[addr][topic] = append(byLeader[addr][topic], i)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for addr, parts := range byLeader {
		wg.Go(func() {
			ok, err := n.sendTxnMarker(ctx, addr, txn, parts, coordinatorEpoch)
			mu.Lock()
			defer mu.Unlock()
			for t, ps := range ok {
				done[t] = append(done[t], ps...)
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	parts, doneGroups := splitMarkerDone(done, txn, groupParts)
	return parts, doneGroups, errors.Join(errs...)
}

// markerTargets returns the partitions txn's marker goes to: its own and
// its groups' __consumer_offsets partitions, with each group's partition
// (-1: no __consumer_offsets topic).
func markerTargets(st *coordinator.State, txn txns.PendingTxn) (txns.Partitions, map[string]int32) {
	all := txns.Partitions{}
	for topic, ps := range txn.Partitions {
		all[topic] = slices.Clone(ps)
	}
	groupParts := map[string]int32{}
	t := st.Topics[groups.OffsetsTopic]
	for _, g := range txn.Groups {
		if t == nil || len(t.Partitions) == 0 {
			groupParts[g] = -1
			continue
		}
		p := groups.PartitionFor(g, int32(len(t.Partitions)))
		groupParts[g] = p
		if !slices.Contains(all[groups.OffsetsTopic], p) {
			all[groups.OffsetsTopic] = append(all[groups.OffsetsTopic], p)
		}
	}
	// Sorted, as txns.Partitions.Contains (sendTxnMarker) searches them.
	slices.Sort(all[groups.OffsetsTopic])
	return all, groupParts
}

// splitMarkerDone splits the partitions whose marker was written into
// the transaction's own and the groups whose offsets partition wrote it.
func splitMarkerDone(done txns.Partitions, txn txns.PendingTxn, groupParts map[string]int32) (txns.Partitions, []string) {
	parts := txns.Partitions{}
	for topic, ps := range done {
		for _, p := range ps {
			if txn.Partitions.Contains(topic, p) {
				parts[topic] = append(parts[topic], p)
			}
		}
	}
	var doneGroups []string
	for _, g := range txn.Groups {
		if p := groupParts[g]; p < 0 || slices.Contains(done[groups.OffsetsTopic], p) { // done is in reply order
			doneGroups = append(doneGroups, g)
		}
	}
	return parts, doneGroups
}

// markerAddr is the Kafka address of broker, where its partitions'
// markers go.
func (n *Node) markerAddr(broker uint64) string {
	if n.cfg.txnMarkerAddr != nil {
		return n.cfg.txnMarkerAddr(broker)
	}
	if b := n.meta.View().Brokers[broker]; b != nil {
		return n.interBrokerAddr(b)
	}
	return ""
}

// txnMarkerRequest is the WriteTxnMarkers request of one transaction's
// marker for parts.
func txnMarkerRequest(txn txns.PendingTxn, parts txns.Partitions, coordinatorEpoch uint64) *kmsg.WriteTxnMarkersRequest {
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = txn.ProducerID, txn.ProducerEpoch, txn.Commit
	m.CoordinatorEpoch = txns.MarkerEpoch(txn, coordinatorEpoch) // partitions take it once (partition.MarkerSeq)
	m.TransactionVersion = 0                                     // KIP-890 part 2 is not modelled (coordinator/txns/doc.go)
	for _, topic := range parts.Topics() {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, parts[topic]
		m.Topics = append(m.Topics, mt)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	return req
}

// sendTxnMarker sends one leader its partitions' marker and returns those
// it wrote.
func (n *Node) sendTxnMarker(ctx context.Context, addr string, txn txns.PendingTxn, parts txns.Partitions, coordinatorEpoch uint64) (txns.Partitions, error) {
	kresp, err := n.brokerRequest(ctx, addr, txnMarkerRequest(txn, parts, coordinatorEpoch))
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	ok := txns.Partitions{}
	var errs []error
	for _, m := range resp.Markers {
		if m.ProducerID != txn.ProducerID {
			continue
		}
		for _, rt := range m.Topics {
			for _, rp := range rt.Partitions {
				switch {
				case !parts.Contains(rt.Topic, rp.Partition):
				case rp.ErrorCode == 0:
					ok[rt.Topic] = append(ok[rt.Topic], rp.Partition)
				default:
					errs = append(errs, fmt.Errorf("marker for %s-%d at %s: %w", rt.Topic, rp.Partition, addr, kerr.ErrorForCode(rp.ErrorCode)))
				}
			}
		}
	}
	return ok, errors.Join(errs...)
}
