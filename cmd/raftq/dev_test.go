package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/raftq/raftq/broker"
)

func TestDevBanner_String(t *testing.T) {
	b := devBanner{kafka: []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"},
		admin: []string{"127.0.0.1:9644", "127.0.0.1:9645", "127.0.0.1:9646"}, dir: "/tmp/d", temp: true, self: "raftq"}
	for _, auto := range []bool{true, false} {
		b.autoCreate = auto
		got := b.String()
		if says := strings.Contains(got, "created on first use"); says != auto {
			t.Errorf("auto-create %v: banner says topics are created on first use: %v\n%s", auto, says, got)
		}
		if !auto && !strings.Contains(got, "create topics first") {
			t.Errorf("auto-create off: banner does not say to create topics first:\n%s", got)
		}
		// Without -e kcat waits for more records and never exits.
		if want := "kcat -b 127.0.0.1:9092 -t demo -C -e\n"; !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
		for _, want := range []string{"data in /tmp/d (removed on exit)", "bootstrap servers   127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094",
			"admin               http://127.0.0.1:9644/ http://127.0.0.1:9645/ http://127.0.0.1:9646/",
			"web console         http://127.0.0.1:9644/ (any node's admin address)",
			"raftq consume demo --brokers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094", "raftq cluster status --admin 127.0.0.1:9644",
			`kgo.SeedBrokers("127.0.0.1:9092")`,
			"\n  export RAFTQ_BROKERS=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 RAFTQ_ADMIN=127.0.0.1:9644\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("banner lacks %q:\n%s", want, got)
			}
		}
	}
}

// raftq dev whose first peer port is taken says which flag moves it
// within a second: the peers' ports come from --base-port, 100 above the
// Kafka ones, which no flag names. The peer listener starts before the
// node's others, so only the taken port is tried.
func TestDev_PeerPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	peer := l.Addr().(*net.TCPAddr).Port
	base := strconv.Itoa(peer - 100)
	out := cliPromptly(t, 1, "", "dev", "--nodes", "1", "--data-dir", t.TempDir(), "--base-port", base)
	want := fmt.Sprintf("node 1: the peer port 127.0.0.1:%d is in use: dev's peers listen 100 above the Kafka ports (--base-port %s: peers from %d); pick another --base-port", peer, base, peer)
	if !strings.Contains(out.stderr, want) {
		t.Errorf("stderr %q, want %q", out.stderr, want)
	}
}

// The Kafka and admin ports name their flags too; other errors pass
// through.
func TestDevPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	taken := l.Addr().String()
	_, listenErr := net.Listen("tcp", taken)
	if listenErr == nil {
		t.Fatalf("second listen on %s succeeded", taken)
	}
	wrapped := fmt.Errorf("kafka listener: %w", listenErr)
	other := "127.0.0.1:1"
	for _, c := range []struct {
		cfg  broker.Config
		want string
	}{
		{broker.Config{KafkaAddr: taken, PeerAddr: other, AdminAddr: other}, "the Kafka port " + taken + " is in use; pick another --base-port"},
		{broker.Config{KafkaAddr: other, PeerAddr: other, AdminAddr: taken}, "the admin port " + taken + " is in use; pick another --admin-port"},
		{broker.Config{KafkaAddr: other, PeerAddr: other, AdminAddr: other}, wrapped.Error()},
	} {
		if got := devPortTaken(wrapped, c.cfg, 9092).Error(); got != c.want {
			t.Errorf("devPortTaken(%+v) = %q, want %q", c.cfg, got, c.want)
		}
	}
	if err := errors.New("disk full"); devPortTaken(err, broker.Config{KafkaAddr: taken}, 9092) != err {
		t.Error("devPortTaken changed an error that is not a port in use")
	}
}

// raftq dev takes the replication flags of raftq server, validated the
// same way.
func TestDev_ReplicationFlags(t *testing.T) {
	out := cliPromptly(t, 2, "", "dev", "--nodes", "1", "--data-dir", t.TempDir(), "--base-port", "22000", "--replica-lag-time-max", "0s")
	if want := "replica lag time max 0s must be positive"; !strings.Contains(out.stderr, want) {
		t.Errorf("stderr %q, want %q", out.stderr, want)
	}
	help := cli(t, 0, "", "dev", "--help")
	for _, flag := range []string{"--replica-lag-time-max", "--replica-fetch-wait-max", "--eligible-leader-replicas"} {
		if !strings.Contains(help.stdout+help.stderr, flag) {
			t.Errorf("raftq dev --help lacks %s", flag)
		}
	}
}

// raftq dev takes the broker configs as raftq server does, and a bad one
// stops it before any node starts, naming it.
func TestDev_BadBrokerConfig(t *testing.T) {
	out := cliPromptly(t, 2, "", "dev", "--nodes", "1", "--data-dir", t.TempDir(), "--override", "log.retention.hours=soon")
	if want := "broker config log.retention.hours=soon: not an int"; !strings.Contains(out.stderr, want) {
		t.Errorf("stderr %q, want %q", out.stderr, want)
	}
}
