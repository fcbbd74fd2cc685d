package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
)

// metaKafkaError maps a failed metadata proposal (coordinator.Controller's
// Propose) to the Kafka error a client should see.
func metaKafkaError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, coordinator.ErrNoController):
		return kerr.NotController
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return err
}
