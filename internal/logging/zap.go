package logging

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Zap returns a *zap.Logger whose entries go to l (nil discards), for etcd's
// storage/wal and snapshotter.
func Zap(l *slog.Logger) *zap.Logger {
	return zap.New(&zapCore{l: Discard(l)})
}

// zapCore is a zapcore.Core that hands each entry to slog.
type zapCore struct {
	l *slog.Logger
}

var _ zapcore.Core = (*zapCore)(nil)

func (c *zapCore) Enabled(lvl zapcore.Level) bool {
	return c.l.Enabled(context.Background(), slogLevel(lvl))
}

func (c *zapCore) With(fields []zapcore.Field) zapcore.Core {
	return &zapCore{l: c.l.With(attrs(fields)...)}
}

func (c *zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	c.l.Log(context.Background(), slogLevel(e.Level), e.Message, attrs(fields)...)
	return nil
}

func (c *zapCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		// etcd's WAL logs routine file operations at info; they are debug for us.
		return slog.LevelDebug
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func attrs(fields []zapcore.Field) []any {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}
