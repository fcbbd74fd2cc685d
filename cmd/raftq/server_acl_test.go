package main

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestServerFlags_Authorizer: --authorizer, --super-users (Kafka's
// ';'-separated list) and --allow-everyone-if-no-acl-found reach
// broker.Config; a super user not of the form Type:name is refused.
func TestServerFlags_Authorizer(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		on     bool
		supers []string
		all    bool
		bad    bool
	}{
		{nil, false, nil, false, false},
		{[]string{"--authorizer", "--super-users", "User:admin; User:ANONYMOUS", "--allow-everyone-if-no-acl-found"}, true, []string{"User:admin", "User:ANONYMOUS"}, true, false},
		{[]string{"--super-users", "admin"}, false, nil, false, true},
	} {
		fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bindServerFlags(fs)
		err := fs.Parse(tc.args)
		if tc.bad {
			if err == nil {
				t.Errorf("%v: taken", tc.args)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.Authorizer != tc.on || !slices.Equal(cfg.SuperUsers, tc.supers) || cfg.AllowEveryoneIfNoACLFound != tc.all {
			t.Errorf("%v: authorizer %v super users %v allow everyone %v", tc.args, cfg.Authorizer, cfg.SuperUsers, cfg.AllowEveryoneIfNoACLFound)
		}
	}
}
