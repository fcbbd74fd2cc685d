package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func newBuf() (*bytes.Buffer, *slog.Logger) {
	var b bytes.Buffer
	return &b, slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestZap_WritesFieldsToSlog(t *testing.T) {
	b, l := newBuf()
	Zap(l).With(zap.String("dir", "/x")).Warn("wal repaired", zap.Int("bytes", 7))
	for _, want := range []string{"level=WARN", "wal repaired", "dir=/x", "bytes=7"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output %q lacks %q", b.String(), want)
		}
	}
}

func TestRaft_Levels(t *testing.T) {
	b, l := newBuf()
	r := Raft(l)
	r.Warningf("term %d", 3)
	r.Errorf("oops %s", "x")
	if got := b.String(); !strings.Contains(got, "level=WARN msg=\"term 3\"") || !strings.Contains(got, "level=ERROR msg=\"oops x\"") {
		t.Errorf("unexpected output %q", got)
	}
}

func TestRaft_PanicPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Panicf did not panic")
		}
	}()
	Raft(nil).Panicf("broken %d", 1)
}

func TestDiscard_Nil(t *testing.T) {
	if Discard(nil).Enabled(context.Background(), slog.LevelError) {
		t.Error("discard logger is enabled at error")
	}
}
