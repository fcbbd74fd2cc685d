package main

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/spf13/pflag"
)

// TestServerFlags_WAL: --wal picks the raft log layout; anything else is a
// usage error naming the flag.
func TestServerFlags_WAL(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		shared bool
		bad    bool
	}{
		{nil, true, false},
		{[]string{"--wal", "shared"}, true, false},
		{[]string{"--wal", "group"}, false, false},
		{[]string{"--wal", "per-node"}, false, true},
	} {
		fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bindServerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		var ue usageError
		switch {
		case tc.bad && !errors.As(err, &ue):
			t.Errorf("%v: err %v, want a usage error", tc.args, err)
		case !tc.bad && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !tc.bad && cfg.SharedWAL != tc.shared:
			t.Errorf("%v: SharedWAL %v, want %v", tc.args, cfg.SharedWAL, tc.shared)
		}
	}
}
