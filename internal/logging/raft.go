package logging

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.etcd.io/raft/v3"
)

// raftLogger forwards raft's printf-style logging to slog. raft's Fatal
// means a broken invariant in raft itself, so it exits as raft's own logger
// does; Panic panics.
type raftLogger struct{ l *slog.Logger }

var _ raft.Logger = raftLogger{}

// Raft returns a raft.Logger that writes to l (nil discards).
func Raft(l *slog.Logger) raft.Logger { return raftLogger{Discard(l)} }

func (r raftLogger) log(level slog.Level, msg string) {
	r.l.Log(context.Background(), level, msg)
}

func (r raftLogger) Debug(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any)                 { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.log(slog.LevelDebug, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.log(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
}

func (r raftLogger) Fatal(v ...any) {
	r.log(slog.LevelError, fmt.Sprint(v...))
	os.Exit(1)
}

func (r raftLogger) Fatalf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}

func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.log(slog.LevelError, s)
	panic(s)
}

func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.log(slog.LevelError, s)
	panic(s)
}
