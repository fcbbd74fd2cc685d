package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestEvery_RunsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("fn ran %d times, want 3 (none after the cancel)", got)
	}
}
