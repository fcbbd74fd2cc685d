package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNode_TransactionalProducerFailsAtOnce: with no transactions yet, a
// transactional producer gets an error its client treats as fatal, not a
// retriable one it would retry until its own timeout (a minute here). The
// test's context, far shorter, ends a retry loop as a failure.
func TestNode_TransactionalProducerFailsAtOnce(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	createTopic(t, c.client(), "tx", 1, 1)
	cl := c.client(kgo.TransactionalID("tx-1"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordDeliveryTimeout(time.Minute), kgo.RetryTimeout(time.Minute))
	// kgo initializes a transactional producer's id in BeginTransaction
	// (or at its first produce, in older versions).
	done := make(chan error, 1)
	go func() {
		err := cl.BeginTransaction()
		if err == nil {
			err = cl.ProduceSync(context.Background(), &kgo.Record{Topic: "tx", Value: []byte("v")}).FirstErr()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("transactional producer: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("transactional producer still retrying after 15 s: the broker's error is retriable")
	}
}

// TestNode_FindTransactionCoordinator answers a transaction key with a
// fatal error and says why, at every version with a message field.
func TestNode_FindTransactionCoordinator(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	addr := c.cfgs[1].KafkaAddr
	for v := int16(1); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, "tx-1", []string{"tx-1"}
		resp := rawKafka(t, addr, req).(*kmsg.FindCoordinatorResponse)
		code, msg := resp.ErrorCode, resp.ErrorMessage
		if v >= 4 {
			if len(resp.Coordinators) != 1 {
				t.Fatalf("v%d: %d coordinators, want 1", v, len(resp.Coordinators))
			}
			code, msg = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].ErrorMessage
		}
		if code != kerr.TransactionalIDAuthorizationFailed.Code || msg == nil || *msg != errNoTransactions {
			t.Errorf("v%d: %v %q, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED %q", v, kerr.ErrorForCode(code), deref(msg), errNoTransactions)
		}
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(5)
	req.TransactionalID = kmsg.StringPtr("tx-1")
	if resp := rawKafka(t, addr, req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("init producer id with a transactional id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
