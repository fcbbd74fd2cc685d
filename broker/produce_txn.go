package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/partition"
)

// KIP-890 verification: before a partition leader appends the first
// transactional batch of a producer's transaction, it asks the
// transaction coordinator (Node.txnVerify, AddPartitionsToTxn with
// VerifyOnly) whether the partition is in that transaction. Otherwise a
// batch delayed past its transaction's marker would open a transaction
// no coordinator knows of, which holds the LSO, and every read_committed
// consumer, forever (a hanging transaction). What was verified is kept,
// as Kafka's VerificationGuard, until a marker for the producer ends the
// transaction here: the marker voids the guard, so a batch verified
// before the marker and appended after it is refused (INVALID_TXN_STATE)
// instead of opening a transaction the coordinator has already closed.

// txnGuards is a partition leader's verification guards, by producer id.
// It is guarded by the partition's produceMu; only a leader's produces
// and markers touch it, and a new leader starts empty (its producers
// verify once more).
type txnGuards struct {
	last uint64 // the last guard id given; ids start at 1
	m    map[int64]txnGuard
}

// txnGuard is one producer's verification in a partition.
type txnGuard struct {
	epoch    int16
	id       uint64
	verified bool
}

// start returns the guard for a producer's epoch, making a new,
// unverified one unless the producer has one of that epoch.
func (g *txnGuards) start(pid int64, epoch int16) txnGuard {
	if cur, ok := g.m[pid]; ok && cur.epoch == epoch {
		return cur
	}
	if g.m == nil {
		g.m = map[int64]txnGuard{}
	}
	g.last++
	cur := txnGuard{epoch: epoch, id: g.last}
	g.m[pid] = cur
	return cur
}

// verified marks guard id verified; false if it is gone (a marker, or a
// failed verification of the same guard).
func (g *txnGuards) verified(pid int64, id uint64) bool {
	cur, ok := g.m[pid]
	if !ok || cur.id != id {
		return false
	}
	cur.verified = true
	g.m[pid] = cur
	return true
}

// holds reports whether guard id still stands, verified.
func (g *txnGuards) holds(pid int64, id uint64) bool {
	cur, ok := g.m[pid]
	return ok && cur.id == id && cur.verified
}

// drop removes the producer's guard if it is id (0: whichever it is).
func (g *txnGuards) drop(pid int64, id uint64) {
	if cur, ok := g.m[pid]; ok && (id == 0 || cur.id == id) {
		delete(g.m, pid)
	}
}

// verifyTxn verifies a transactional batch with the coordinator unless
// its producer's transaction has been verified here already. It returns
// the guard the append must find still standing, or the code refusing
// the batch: the hook's, or INVALID_TXN_STATE when a marker ended the
// transaction during the verification. Without a hook (nil) nothing is
// verified and the guard is 0. It runs on the request's goroutine, so a
// connection's later batches wait behind it and keep their order.
func (n *Node) verifyTxn(ctx context.Context, rep *dataPartition, transactionalID, topic string, index int32, info partition.BatchInfo) (uint64, int16) {
	verify := n.txnVerify
	if verify == nil {
		return 0, 0
	}
	pid, epoch := info.ProducerID, info.ProducerEpoch
	rep.produceMu.Lock()
	g := rep.txnGuards.start(pid, epoch)
	rep.produceMu.Unlock()
	if g.verified {
		return g.id, 0
	}
	if code := verify(ctx, transactionalID, pid, epoch, topic, index); code != 0 {
		rep.produceMu.Lock()
		rep.txnGuards.drop(pid, g.id)
		rep.produceMu.Unlock()
		return 0, code
	}
	rep.produceMu.Lock()
	ok := rep.txnGuards.verified(pid, g.id)
	rep.produceMu.Unlock()
	if !ok {
		return 0, kerr.InvalidTxnState.Code
	}
	return g.id, 0
}
