package logging

import (
	"io"
	"log/slog"
)

// Discard returns l, or a logger that drops everything when l is nil.
func Discard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}
