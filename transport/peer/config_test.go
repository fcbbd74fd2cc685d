package peer

import (
	"strings"
	"testing"
)

func TestConfig_Validate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.ClusterID, c.NodeID = "c", 1
		c.Peers = map[uint64]string{2: "127.0.0.1:2"}
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no cluster", func(c *Config) { c.ClusterID = "" }, "cluster id"},
		{"long cluster", func(c *Config) { c.ClusterID = strings.Repeat("x", 256) }, "cluster id"},
		{"node 0", func(c *Config) { c.NodeID = 0 }, "node id"},
		{"no listen", func(c *Config) { c.ListenAddr = "" }, "listen"},
		{"self peer", func(c *Config) { c.Peers[1] = "x" }, "own id"},
		{"peer 0", func(c *Config) { c.Peers[0] = "x" }, "own id"},
		{"empty addr", func(c *Config) { c.Peers[2] = "" }, "no address"},
		{"queue", func(c *Config) { c.QueueSize = 0 }, "queue"},
		{"tiny frames", func(c *Config) { c.MaxFrameBytes = 100 }, "max frame"},
		{"chunk too big", func(c *Config) { c.SnapshotChunkBytes = c.MaxFrameBytes }, "chunk"},
		{"snapshots", func(c *Config) { c.MaxSnapshotsPerPeer = 0 }, "snapshots"},
		{"tiny fetches", func(c *Config) { c.MaxFetchBytes = 100 }, "max fetch bytes"},
		{"huge fetches", func(c *Config) { c.MaxFetchBytes = maxFrameLimit }, "max fetch bytes"},
		{"dial timeout", func(c *Config) { c.DialTimeout = 0 }, "dial timeout"},
		{"backoff", func(c *Config) { c.BackoffMax = c.BackoffMin / 2 }, "backoff"},
		{"read vs keepalive", func(c *Config) { c.ReadTimeout = c.KeepaliveInterval }, "keepalive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error about %q", err, tc.want)
			}
			if _, err := New(c); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestBackoff_GrowsWithJitterWithinBounds(t *testing.T) {
	b := newBackoff(10, 80)
	for i, hi := range []int64{10, 20, 40, 80, 80} {
		d := int64(b.next())
		if d < hi/2 || d > hi {
			t.Errorf("attempt %d: %d outside [%d, %d]", i, d, hi/2, hi)
		}
	}
	b.reset()
	if d := b.next(); d > 10 {
		t.Errorf("after reset: %d, want <= 10", d)
	}
}
