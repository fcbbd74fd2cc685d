package peer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A node that is not among the acceptor's peers, and names neither its
// id nor its cluster, gets the JoinHandler's answer, the acceptor's id
// and cluster id; the handler sees what the hello presented.
func TestJoin_UnknownNodeGetsAnAnswer(t *testing.T) {
	var gotFrom atomic.Uint64
	var gotInc atomic.Value
	n1 := startNode(t, 1, func(c *Config) {
		c.JoinHandler = func(_ context.Context, from uint64, inc string, req []byte) []byte {
			gotFrom.Store(from)
			gotInc.Store(inc)
			return append([]byte("welcome "), req...)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cluster := range []string{"", "test-cluster"} {
		a, err := Join(ctx, JoinConfig{NodeID: 9, ClusterID: cluster, Incarnation: "inc-9"}, n1.Addr().String(), []byte("node 9"))
		if err != nil {
			t.Fatalf("join naming cluster %q: %v", cluster, err)
		}
		if a.Node != 1 || a.ClusterID != "test-cluster" || string(a.Response) != "welcome node 9" {
			t.Errorf("answer %+v (%q)", a, a.Response)
		}
	}
	if gotFrom.Load() != 9 || gotInc.Load() != "inc-9" {
		t.Errorf("handler saw node %d incarnation %v", gotFrom.Load(), gotInc.Load())
	}
	if _, ok := n1.PeerStats(9); ok {
		t.Error("a join made the joiner a peer")
	}
}

// A join naming another cluster, from the acceptor's own id, or to a
// node that serves no joins is refused at the handshake; the handler
// never runs.
func TestJoin_Refusals(t *testing.T) {
	var calls atomic.Int32
	handler := func(context.Context, uint64, string, []byte) []byte { calls.Add(1); return nil }
	n1 := startNode(t, 1, func(c *Config) { c.JoinHandler = handler })
	n2 := startNode(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name   string
		addr   string
		cfg    JoinConfig
		want   error
		reason string
	}{
		{"another cluster", n1.Addr().String(), JoinConfig{NodeID: 9, ClusterID: "other", Incarnation: "i"}, ErrClusterID, `asks to join cluster "other"`},
		{"the acceptor's own id", n1.Addr().String(), JoinConfig{NodeID: 1, Incarnation: "i"}, ErrDuplicateID, "this node's own"},
		{"no join handler", n2.Addr().String(), JoinConfig{NodeID: 9, Incarnation: "i"}, ErrNoJoinHandler, "serves no joins"},
		{"node id 0", n1.Addr().String(), JoinConfig{NodeID: 0, Incarnation: "i"}, ErrBadHandshake, "node id 0"},
	} {
		_, err := Join(ctx, c.cfg, c.addr, []byte("x"))
		var re *RefusedError
		if !errors.Is(err, c.want) || !errors.As(err, &re) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want a refusal %v saying %q", c.name, err, c.want, c.reason)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("the handler ran %d times for refused joins", calls.Load())
	}
}

// Join to an address nobody listens on fails with the dial error, and a
// context that ends while the acceptor's handler runs ends the Join; a
// request over MaxJoinBytes is refused before anything is sent.
func TestJoin_Failures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Join(ctx, JoinConfig{NodeID: 9}, dead, nil); err == nil || !strings.Contains(err.Error(), "dial "+dead) {
		t.Errorf("join to a closed port: %v", err)
	}
	release := make(chan struct{})
	n1 := startNode(t, 1, func(c *Config) {
		c.JoinHandler = func(ctx context.Context, _ uint64, _ string, _ []byte) []byte {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
	})
	defer close(release)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := Join(short, JoinConfig{NodeID: 9}, n1.Addr().String(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("join whose context ends: %v, want DeadlineExceeded", err)
	}
	if _, err := Join(ctx, JoinConfig{NodeID: 9}, n1.Addr().String(), bytes.Repeat([]byte("x"), MaxJoinBytes+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized join request: %v", err)
	}
}
