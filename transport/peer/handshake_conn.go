package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// acceptLoop accepts connections until the listener closes; each is
// handshaken on its own goroutine so a slow dialler holds up no one.
func (t *Transport) acceptLoop(ln net.Listener) {
	defer t.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("accept peer connection", "err", err)
			if !sleepCtx(t.ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		if !t.goTracked(func() { t.handleInbound(conn) }) {
			conn.Close()
			return
		}
	}
}

// handleInbound handshakes an accepted connection and hands it to its peer
// (raft stream) or serves it (snapshot stream).
func (t *Transport) handleInbound(raw net.Conn) {
	stop := context.AfterFunc(t.ctx, func() { raw.Close() })
	defer stop()
	conn, ok := t.acceptTLS(raw) // tls.go
	if !ok {
		return
	}
	h, p, err := t.acceptHandshake(conn)
	if err != nil {
		t.refuse(conn, h, err)
		return
	}
	switch h.stream {
	case streamRaft:
		p.handover(conn)
	case streamSnapshot:
		defer conn.Close()
		defer p.snapsIn.Add(-1)
		stopPeer := context.AfterFunc(p.ctx, func() { conn.Close() }) // RemovePeer ends it too
		defer stopPeer()
		p.receiveSnapshot(conn)
	case streamFetch:
		p.serveFetch(conn)
	case streamJoin:
		t.serveJoin(conn, h)
	}
}

// acceptHandshake reads the hello, judges it, and on success answers it.
func (t *Transport) acceptHandshake(conn net.Conn) (hello, *peer, error) {
	if err := conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return hello{}, nil, fmt.Errorf("set handshake deadline: %w", err)
	}
	h, err := readHello(conn)
	if err != nil {
		return h, nil, err
	}
	if err := t.checkCertificate(conn, h.from); err != nil { // tls.go
		return h, nil, err
	}
	if h.stream == streamJoin {
		return h, nil, t.acceptJoin(conn, h)
	}
	p, err := t.admit(h)
	if err != nil {
		return h, nil, err
	}
	rp := reply{version: protoVersion, node: t.cfg.NodeID, cluster: t.cfg.ClusterID, incarnation: t.cfg.Incarnation}
	if _, err := conn.Write(appendReply(nil, rp)); err != nil {
		p.releaseInbound(h.stream)
		return h, nil, fmt.Errorf("write handshake reply: %w", err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		p.releaseInbound(h.stream)
		return h, nil, fmt.Errorf("clear handshake deadline: %w", err)
	}
	return h, p, nil
}

// acceptJoin judges a join stream's hello and answers it.
func (t *Transport) acceptJoin(conn net.Conn, h hello) error {
	if err := t.admitJoin(h); err != nil {
		return err
	}
	rp := reply{version: protoVersion, node: t.cfg.NodeID, cluster: t.cfg.ClusterID, incarnation: t.cfg.Incarnation}
	if _, err := conn.Write(appendReply(nil, rp)); err != nil {
		return fmt.Errorf("write handshake reply: %w", err)
	}
	return nil
}

// admit decides whether node h.from may open this stream.
func (t *Transport) admit(h hello) (*peer, error) {
	switch {
	case h.cluster != t.cfg.ClusterID:
		return nil, fmt.Errorf("%w: node %d is in cluster %q, this node in %q", ErrClusterID, h.from, h.cluster, t.cfg.ClusterID)
	case h.from == t.cfg.NodeID:
		return nil, fmt.Errorf("%w: a peer claims node id %d, which is this node's own", ErrDuplicateID, h.from)
	case h.to != t.cfg.NodeID:
		return nil, fmt.Errorf("%w: node %d dialled node %d, but this is node %d", ErrWrongNode, h.from, h.to, t.cfg.NodeID)
	}
	p := t.peer(h.from)
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: node %d is not among this node's peers", ErrUnknownPeer, h.from)
	case h.stream == streamRaft && p.dials():
		return nil, fmt.Errorf("%w: node %d dialled node %d, but the lower id dials", ErrWrongDirection, h.from, t.cfg.NodeID)
	case h.stream == streamRaft:
		// A newer connection normally replaces the old one (the peer
		// restarted, or its old connection is half open). But while the
		// old one is live, a second process is claiming the id: letting
		// it in would split the id's raft traffic between two nodes with
		// different logs, which breaks raft (a real node panicked on a
		// commit index its log did not reach). The first stays; a
		// restarted peer's old connection has ended (its kernel closed
		// it) or falls silent past the window, and its redial then gets in.
		if remote, ago, live := p.liveStream(t.liveWindow()); live {
			return nil, fmt.Errorf("%w: node %d is already connected from %s (heard from %s ago); is a second process running with id %d?",
				ErrDuplicateID, h.from, remote, ago.Round(time.Millisecond), h.from)
		}
	case h.stream == streamFetch && t.cfg.FetchHandler == nil:
		return nil, fmt.Errorf("%w: node %d asked for a fetch stream, but node %d has no fetch handler", ErrNoFetchHandler, h.from, t.cfg.NodeID)
	case h.stream == streamFetch:
		// One fetch stream per (fetcher, leader) pair, as for the raft
		// stream: a second one while the first is live is a second
		// process with the id, whose fetch offsets would pass for the
		// real node's log end.
		if remote, ago, live := p.liveFetchStream(t.liveWindow()); live {
			return nil, fmt.Errorf("%w: node %d already has a live fetch stream from %s (last request %s ago); is a second process running with id %d?",
				ErrDuplicateID, h.from, remote, ago.Round(time.Millisecond), h.from)
		}
	}
	// After the live-duplicate check, whose message says more about a
	// second process; before a snapshot slot is taken.
	if err := checkIncarnation(t.cfg.CheckIncarnation, h.from, h.incarnation); err != nil {
		return nil, err
	}
	if h.stream == streamSnapshot && !p.acquireInbound() {
		return nil, fmt.Errorf("%w: node %d already has %d snapshot streams open here", ErrSnapshotBusy, h.from, t.cfg.MaxSnapshotsPerPeer)
	}
	return p, nil
}

// liveWindow is how recently a raft stream must have carried a frame to
// count as live: a healthy peer sends one at least every 2 keepalive
// intervals, and a stream silent for ReadTimeout is closed anyway.
func (t *Transport) liveWindow() time.Duration {
	return min(3*t.cfg.KeepaliveInterval, t.cfg.ReadTimeout)
}

func (p *peer) acquireInbound() bool {
	if p.snapsIn.Add(1) > int32(p.t.cfg.MaxSnapshotsPerPeer) {
		p.snapsIn.Add(-1)
		return false
	}
	return true
}

func (p *peer) releaseInbound(stream byte) {
	if stream == streamSnapshot {
		p.snapsIn.Add(-1)
	}
}

// refuse tells the dialler why it is refused, logs it here, and closes.
func (t *Transport) refuse(conn net.Conn, h hello, err error) {
	defer conn.Close()
	remote := conn.RemoteAddr().String()
	if isSilentProbe(err) {
		t.log.Debug("peer connection closed before its handshake", "remote", remote)
		return
	}
	t.stats.refusedInbound.Add(1)
	level := slog.LevelError // the nodes disagree on who is who: a misconfiguration
	if errors.Is(err, ErrSnapshotBusy) {
		level = slog.LevelWarn
	}
	t.log.Log(t.ctx, level, "refusing peer connection", "remote", remote, "claimed_node", h.from, "err", err)
	rp := reply{version: protoVersion, code: refusalOf(err), node: t.cfg.NodeID, cluster: t.cfg.ClusterID, reason: err.Error()}
	conn.Write(appendReply(nil, rp)) // best effort: the dialler may be gone
}

// dialStream connects to p, handshakes for stream, and returns the
// connection ready for frames.
func (t *Transport) dialStream(ctx context.Context, p *peer, stream byte) (net.Conn, error) {
	addr := p.address()
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	raw, err := t.dial(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial node %d: %w", p.id, err)
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	conn, err := dialTLS(ctx, raw, t.cfg.ClientTLS, addr, t.cfg.HandshakeTimeout) // tls.go
	if err == nil {
		if err = t.checkCertificate(conn, p.id); err != nil {
			conn.Close()
		}
	}
	if err != nil {
		t.stats.tlsFailedOutbound.Add(1)
		return nil, fmt.Errorf("dial node %d: %w", p.id, err)
	}
	if err := t.dialHandshake(conn, p.id, stream); err != nil {
		conn.Close()
		t.countRefusedOutbound(err)
		return nil, fmt.Errorf("handshake with %s: %w", addr, explainTLSRefusal(err))
	}
	return conn, nil
}

// countRefusedOutbound counts a failed hello/reply exchange that is a
// refusal: at the TLS layer (the peer's alert) or in the reply.
func (t *Transport) countRefusedOutbound(err error) {
	switch {
	case tlsRefusedUs(err) || errors.Is(err, ErrTLS):
		t.stats.tlsFailedOutbound.Add(1)
	case isRefusal(err):
		t.stats.refusedOutbound.Add(1)
	}
}

func (t *Transport) dialHandshake(conn net.Conn, to uint64, stream byte) error {
	if err := conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return fmt.Errorf("set handshake deadline: %w", err)
	}
	h := hello{version: protoVersion, stream: stream, from: t.cfg.NodeID, to: to, cluster: t.cfg.ClusterID, incarnation: t.cfg.Incarnation}
	if _, err := conn.Write(appendHello(nil, h)); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	rp, err := readReply(conn)
	if err != nil {
		return err
	}
	if err := judgeReply(rp, to, t.cfg.ClusterID, t.cfg.CheckIncarnation); err != nil {
		return err
	}
	return conn.SetDeadline(time.Time{})
}

// isRefusal tells a handshake the two nodes disagree on (a configuration
// problem) from a network failure.
func isRefusal(err error) bool {
	for _, sentinel := range []error{ErrClusterID, ErrIncarnation, ErrDuplicateID, ErrWrongNode, ErrUnknownPeer, ErrWrongDirection, ErrVersion, ErrBadHandshake, ErrNoFetchHandler, ErrTLS, ErrCertificate} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
