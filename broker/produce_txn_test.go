package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceTxnOne(t *testing.T, n *Node, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequest("t", 0, -1, batch)
	req.TransactionID = kmsg.StringPtr("tx")
	return result(t, n.produce(context.Background(), req, "")).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// A marker that ends the transaction while its batch is being verified
// voids the verification: the batch is refused instead of opening a
// transaction the coordinator has closed (a hanging transaction).
func TestProduce_MarkerDuringVerificationRefusesTheBatch(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	entered, release := make(chan struct{}), make(chan struct{})
	n.txnVerify = func(context.Context, string, int64, int16, string, int32) int16 {
		entered <- struct{}{}
		<-release
		return 0
	}
	done := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() { done <- produceTxnOne(t, n, txnBatch(t, 9, 0, 0, "late")) }()
	<-entered
	codes := markerCodes(t, unitMarkers(t, n, markersRequest(9, 0, false, map[string][]int32{"t": {0}})))
	if codes["t"][0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes["t"][0]))
	}
	close(release)
	if sp := <-done; sp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("batch verified across a marker: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := f.log.OngoingTransactions(); len(got) != 0 {
		t.Errorf("open transactions %+v after the refused batch, want none", got)
	}
	// The next batch verifies again and opens the transaction.
	n.txnVerify = func(context.Context, string, int64, int16, string, int32) int16 { return 0 }
	if sp := produceTxnOne(t, n, txnBatch(t, 9, 0, 0, "next")); sp.ErrorCode != 0 {
		t.Fatalf("next transaction: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := f.log.OngoingTransactions(); len(got) != 1 || got[0].ProducerID != 9 {
		t.Errorf("open transactions %+v, want producer 9's", got)
	}
}
