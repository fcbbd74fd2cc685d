package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConn_IdentityAndContext(t *testing.T) {
	f := newFake()
	ts := startServer(t, f, nil)
	a, b := dialRaw(t, ts.Addr()), dialRaw(t, ts.Addr())
	a.ping(1) // ApiVersions v3 with software "raw" "1", client id "test"
	b.ping(1)

	conns := f.conns()
	ca, cb := conns[0], conns[1]
	if ca.ID() == cb.ID() {
		t.Fatalf("two connections share id %d", ca.ID())
	}
	if got, want := ca.RemoteAddr().String(), a.conn.LocalAddr().String(); got != want {
		t.Errorf("RemoteAddr %s, want %s", got, want)
	}
	if got, want := ca.LocalAddr().String(), ts.Addr().String(); got != want {
		t.Errorf("LocalAddr %s, want %s", got, want)
	}
	if got := ca.ClientID(); got != "test" {
		t.Errorf("ClientID %q, want test", got)
	}
	if got, want := ca.ClientSoftware(), (ClientSoftware{Name: "raw", Version: "1"}); got != want {
		t.Errorf("ClientSoftware %+v, want %+v", got, want)
	}
	if ca.Context().Err() != nil {
		t.Fatal("context done while the connection is open")
	}

	a.conn.Close()
	eventually(t, "context cancelled when the client closes", func() bool { return ca.Context().Err() != nil })
	if cb.Context().Err() != nil {
		t.Fatal("closing one connection cancelled another's context")
	}
	b.ping(2)
}

// A null client id reads as "", and a later request's id replaces it.
func TestConn_ClientIDFollowsRequests(t *testing.T) {
	f := newFake()
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())
	req := metadataReq(4)
	rc.write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)) // null client id
	rc.read(req, 1)
	c := f.conns()[0]
	if got := c.ClientID(); got != "" {
		t.Fatalf("ClientID %q after a null one, want empty", got)
	}
	if f.requests()[0].Header.ClientID != nil {
		t.Fatal("Header.ClientID not nil for a null client id")
	}
	rc.send(2, req)
	rc.read(req, 2)
	if got := c.ClientID(); got != "test" {
		t.Fatalf("ClientID %q, want test", got)
	}
}

func TestServer_IdleTimeoutClosesOnlyIdleConnections(t *testing.T) {
	f := newFake()
	fut := NewFuture()
	f.serve = func(c *Conn, req *Request) Pending {
		if req.Header.CorrelationID == 7 {
			return fut
		}
		return Ready(f.answer(req))
	}
	busyIdle := make(chan struct{}, 16)
	ts := startServerHooks(t, f, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond },
		testHooks{idleWhileBusy: func(*Conn) {
			select {
			case busyIdle <- struct{}{}:
			default:
			}
		}})

	busy := dialRaw(t, ts.Addr())
	slow := metadataReq(12, "slow")
	busy.send(7, slow)
	<-busyIdle // the idle timeout passed twice while the request was in flight
	<-busyIdle
	fut.Complete(f.answer(f.requests()[0]), nil)
	busy.read(slow, 7)

	idle := dialRaw(t, ts.Addr())
	idle.expectClosed()
	eventually(t, "idle connections closed as idle", func() bool { return ts.obs.anyClosedWith(ErrIdle) })
}

func TestServer_ShutdownWritesOwedResponses(t *testing.T) {
	f := newFake()
	fut := NewFuture()
	f.serve = func(c *Conn, req *Request) Pending { return fut }
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())
	req := metadataReq(12, "a")
	rc.send(1, req)
	eventually(t, "request served", func() bool { return len(f.requests()) == 1 })

	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	eventually(t, "connection draining", f.conns()[0].isDraining)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a response owed", err)
	default:
	}
	fut.Complete(f.answer(f.requests()[0]), nil)
	rc.read(req, 1)
	rc.expectClosed()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := ts.obs.Snapshot().ConnsOpen; got != 0 {
		t.Fatalf("%d connections open after Shutdown", got)
	}
}

func TestServer_ShutdownDeadlineCloses(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending { return NewFuture() } // never completes
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())
	rc.send(1, metadataReq(12))
	eventually(t, "request served", func() bool { return len(f.requests()) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	rc.expectClosed()
}

func TestServer_CloseCancelsConnections(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending { return NewFuture() }
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())
	rc.send(1, metadataReq(12))
	eventually(t, "request served", func() bool { return len(f.requests()) == 1 })

	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	c := f.conns()[0]
	if !errors.Is(context.Cause(c.Context()), ErrServerClosed) {
		t.Fatalf("connection context cause %v, want ErrServerClosed", context.Cause(c.Context()))
	}
	rc.expectClosed()
	if got := ts.obs.Snapshot(); got.ConnsOpen != 0 || got.Outcomes[OutcomeFailed] != 1 {
		t.Fatalf("after Close: %d open, %d failed; want 0 open, the pending request failed", got.ConnsOpen, got.Outcomes[OutcomeFailed])
	}
	if err := ts.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
