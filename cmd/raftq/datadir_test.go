package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/raftq/raftq/broker"
)

// A second node on a data dir in use fails at once, naming the dir and
// the holder, and the dir is free again once the first node has closed.
// Both opens are in this process: the lock is per open file, not per
// process.
func TestOpenNode_DataDirHeld(t *testing.T) {
	dir := t.TempDir()
	cfg := loopbackNodeConfig(t, dir)
	_, closeFirst, err := openNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, closeSecond, err := openNode(cfg); err == nil {
		_ = closeSecond()
		t.Fatal("second openNode on a held data dir succeeded")
	} else if got, want := err.Error(), "another raftq holds "+dir+" (pid "+strconv.Itoa(os.Getpid())+")"; got != want {
		t.Errorf("second openNode: %q, want %q", got, want)
	}
	if err := closeFirst(); err != nil {
		t.Fatal(err)
	}
	_, closeAgain, err := openNode(cfg)
	if err != nil {
		t.Fatalf("openNode after the first closed: %v", err)
	}
	if err := closeAgain(); err != nil {
		t.Fatal(err)
	}
}

// raftq server and raftq dev on a held data dir say so within a second,
// before they bind a port.
func TestCLI_DataDirHeld(t *testing.T) {
	dir := t.TempDir()
	node1 := filepath.Join(dir, "node1")
	for _, d := range []string{dir, node1} {
		release, err := lockDataDir(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	out := cliPromptly(t, 1, "", "server", "--data-dir", dir, "--kafka-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	if want := "another raftq holds " + dir; !strings.Contains(out.stderr, want) {
		t.Errorf("raftq server: stderr %q, want %q", out.stderr, want)
	}
	out = cliPromptly(t, 1, "", "dev", "--data-dir", dir, "--base-port", "0", "--admin-port", "0")
	if want := "node 1: another raftq holds " + node1; !strings.Contains(out.stderr, want) {
		t.Errorf("raftq dev: stderr %q, want %q", out.stderr, want)
	}
}

// loopbackNodeConfig is a one-node cluster's config on dir with every
// listener on a free loopback port.
func loopbackNodeConfig(t *testing.T, dir string) broker.Config {
	t.Helper()
	f := &serverFlags{cfg: broker.DefaultConfig(), fsync: "never", wal: walMode(false)}
	f.cfg.NodeID, f.cfg.DataDir = 1, dir
	f.cfg.KafkaAddr, f.cfg.PeerAddr, f.cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg, err := f.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
