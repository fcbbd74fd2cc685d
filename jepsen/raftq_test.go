package jepsen

import (
	"errors"
	"testing"
)

func TestRaftqConfig_Validate(t *testing.T) {
	good := DefaultRaftqConfig()
	good.Binary = "/bin/true"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a binary: %v", err)
	}
	for name, mod := range map[string]func(*RaftqConfig){
		"no binary":     func(c *RaftqConfig) { c.Binary = "" },
		"no nodes":      func(c *RaftqConfig) { c.Nodes = 0 },
		"bad fsync":     func(c *RaftqConfig) { c.Fsync = "sometimes" },
		"no report dir": func(c *RaftqConfig) { c.Run.ReportDir = "" },
		"no timeout":    func(c *RaftqConfig) { c.ReadyTimeout = 0 },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
