package partition

import (
	"context"
	"errors"
	"testing"
)

func TestLog_WaitHighWatermark(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	got := make(chan int64, 1)
	go func() {
		hw, err := l.WaitHighWatermark(context.Background(), 2)
		if err != nil {
			t.Error(err)
		}
		got <- hw
	}()
	mustAppend(t, l, uniformBatch(t, 5, 10, 0), 0)
	if err := l.SetHighWatermark(2); err != nil { // not past 2 yet
		t.Fatal(err)
	}
	select {
	case hw := <-got:
		t.Fatalf("woke at hw %d, not above 2", hw)
	default:
	}
	if err := l.SetHighWatermark(5); err != nil {
		t.Fatal(err)
	}
	if hw := <-got; hw != 5 {
		t.Fatalf("woke with hw %d, want 5", hw)
	}
	if err := l.SetHighWatermark(6); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("hw above the end = %v", err)
	}
}

func TestLog_WatchHighWatermarkClosesOnChange(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, uniformBatch(t, 3, 10, 0), 0)
	hw, changed := l.WatchHighWatermark()
	if hw != 0 {
		t.Fatalf("initial hw %d", hw)
	}
	select {
	case <-changed:
		t.Fatal("changed closed before any change")
	default:
	}
	l.SetHighWatermark(0) // same value: no wake-up
	select {
	case <-changed:
		t.Fatal("changed closed without a change")
	default:
	}
	l.SetHighWatermark(3)
	<-changed
	end, endChanged := l.WatchEnd()
	if end != 3 {
		t.Fatalf("end %d", end)
	}
	mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
	<-endChanged
}

func TestLog_WaitHighWatermarkEndsOnCancelAndClose(t *testing.T) {
	l, err := Open(t.TempDir(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { _, err := l.WaitHighWatermark(ctx, 10); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after cancel = %v", err)
	}
	go func() { _, err := l.WaitHighWatermark(context.Background(), 10); errc <- err }()
	l.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait after close = %v", err)
	}
}

func TestLog_TruncateLowersHighWatermarkAndWakesWatchers(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, uniformBatch(t, 3, 10, 0), 0)
	mustAppend(t, l, uniformBatch(t, 3, 10, 0), 0)
	l.SetHighWatermark(6)
	_, changed := l.WatchHighWatermark()
	if _, err := l.Truncate(3); err != nil {
		t.Fatal(err)
	}
	<-changed
	if hw := l.HighWatermark(); hw != 3 {
		t.Fatalf("hw %d after truncating to 3", hw)
	}
}
