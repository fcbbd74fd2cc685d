package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// A join stream is how a node that is not yet a member asks one that is
// to let it in (see the package documentation, Join streams). Its hello
// may come from an id the acceptor does not know, name no receiver (to
// 0) and no cluster (empty: whichever the acceptor's is); after the
// handshake it carries one request frame and one response frame, then
// closes:
//
//	kindJoinReq   the request
//	kindJoinResp  the response
const (
	kindJoinReq byte = kindFetchErr + 1 + iota
	kindJoinResp
)

// MaxJoinBytes bounds a join request and a join response.
const MaxJoinBytes = 1 << 20

// JoinTimeout bounds a join stream on the accepting side: the request's
// arrival, the handler (whose context ends then) and the answer.
const JoinTimeout = 30 * time.Second

// JoinConfig is what a node that is not yet a member needs to ask one
// that is: Join dials with no Transport of its own.
type JoinConfig struct {
	// NodeID is the joining node's id, never 0.
	NodeID uint64
	// ClusterID is the cluster the node means to join; empty asks any
	// cluster and learns its id from the answer.
	ClusterID string
	// Incarnation names the joining node's data directory.
	Incarnation string
	// Dial, if set, replaces net.Dialer.DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, if set, is the client config the join stream handshakes
	// with, as Config.ClientTLS: required by a member whose peer port
	// has TLS.
	TLS *tls.Config
}

// JoinAnswer is a member's answer to Join.
type JoinAnswer struct {
	Node      uint64 // the answering node's id
	ClusterID string // its cluster's
	Response  []byte // what its JoinHandler returned
}

// Join sends req to the node listening for peers at addr on a join
// stream and returns its JoinHandler's answer. A refused handshake (the
// node is in another cluster, serves no joins) is a *RefusedError; ctx
// bounds the whole exchange.
func Join(ctx context.Context, c JoinConfig, addr string, req []byte) (JoinAnswer, error) {
	var a JoinAnswer
	if len(req) > MaxJoinBytes {
		return a, fmt.Errorf("%w: join request of %d bytes, limit %d", ErrFrameTooLarge, len(req), MaxJoinBytes)
	}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return a, fmt.Errorf("dial %s: %w", addr, err)
	}
	if conn, err = dialTLS(ctx, conn, c.TLS, addr, DefaultConfig().HandshakeTimeout); err != nil { // tls.go
		return a, fmt.Errorf("join %s: %w", addr, ctxErr(ctx, err))
	}
	defer conn.Close()
	// Closing on ctx's end, rather than a deadline from it, makes every
	// failure after it report ctx's error (ctxErr).
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	h := hello{version: protoVersion, stream: streamJoin, from: c.NodeID, cluster: c.ClusterID, incarnation: c.Incarnation}
	if _, err := conn.Write(appendHello(nil, h)); err != nil {
		return a, fmt.Errorf("join %s: write hello: %w", addr, ctxErr(ctx, err))
	}
	rp, err := readReply(conn)
	if err != nil {
		return a, fmt.Errorf("join %s: %w", addr, ctxErr(ctx, explainTLSRefusal(err)))
	}
	if err := judgeJoinReply(rp, c.ClusterID); err != nil {
		return a, fmt.Errorf("join %s: %w", addr, err)
	}
	a.Node, a.ClusterID = rp.node, rp.cluster
	if _, err := conn.Write(appendFrame(nil, kindJoinReq, req)); err != nil {
		return a, fmt.Errorf("join %s: write request: %w", addr, ctxErr(ctx, err))
	}
	fr := newFrameReader(conn, 4096, MaxJoinBytes+1)
	kind, body, err := fr.next()
	if err != nil {
		return a, fmt.Errorf("join %s: read answer: %w", addr, ctxErr(ctx, noEOF(err)))
	}
	if kind != kindJoinResp {
		return a, fmt.Errorf("join %s: %w: frame kind %d on a join stream", addr, ErrCorruptFrame, kind)
	}
	a.Response = append([]byte(nil), body...)
	return a, nil
}

// judgeJoinReply is judgeReply for a join stream: any node id, and any
// cluster when the joiner named none.
func judgeJoinReply(rp reply, cluster string) error {
	if rp.code != refuseNone {
		return &RefusedError{Node: rp.node, Reason: rp.reason, code: rp.code}
	}
	switch {
	case rp.version != protoVersion:
		return fmt.Errorf("%w: node %d accepted with version %d, this node speaks %d", ErrVersion, rp.node, rp.version, protoVersion)
	case cluster != "" && rp.cluster != cluster:
		return fmt.Errorf("%w: node %d is in cluster %q, this node in %q", ErrClusterID, rp.node, rp.cluster, cluster)
	case rp.node == 0 || rp.cluster == "":
		return fmt.Errorf("%w: join accepted by node %d of cluster %q", ErrBadHandshake, rp.node, rp.cluster)
	}
	return nil
}

// ctxErr prefers ctx's error to the I/O error its end caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// admitJoin decides whether node h.from may open a join stream: it need
// not be a peer, but it must be in this cluster if it names one.
func (t *Transport) admitJoin(h hello) error {
	switch {
	case h.cluster != "" && h.cluster != t.cfg.ClusterID:
		return fmt.Errorf("%w: node %d asks to join cluster %q, this node is in %q", ErrClusterID, h.from, h.cluster, t.cfg.ClusterID)
	case h.from == t.cfg.NodeID:
		return fmt.Errorf("%w: a joining node claims node id %d, which is this node's own", ErrDuplicateID, h.from)
	case h.to != 0 && h.to != t.cfg.NodeID:
		return fmt.Errorf("%w: node %d meant to reach node %d, but this is node %d", ErrWrongNode, h.from, h.to, t.cfg.NodeID)
	case t.cfg.JoinHandler == nil:
		return fmt.Errorf("%w: node %d asked to join, but node %d serves no joins", ErrNoJoinHandler, h.from, t.cfg.NodeID)
	}
	return nil
}

// serveJoin reads the one request of an accepted join stream, answers it
// with the JoinHandler's response and closes the stream.
func (t *Transport) serveJoin(conn net.Conn, h hello) {
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.ctx, JoinTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.SetDeadline(time.Now().Add(JoinTimeout)); err != nil {
		return
	}
	fr := newFrameReader(conn, 4096, MaxJoinBytes+1)
	kind, body, err := fr.next()
	if err == nil && kind != kindJoinReq {
		err = fmt.Errorf("%w: frame kind %d on a join stream", ErrCorruptFrame, kind)
	}
	if err != nil {
		if !errors.Is(err, net.ErrClosed) {
			t.log.Warn("join stream", "remote", conn.RemoteAddr().String(), "joiner", h.from, "err", err)
		}
		return
	}
	req := append([]byte(nil), body...)
	resp := t.cfg.JoinHandler(ctx, h.from, h.incarnation, req)
	if len(resp) > MaxJoinBytes {
		t.log.Error("join answer too large", "joiner", h.from, "bytes", len(resp), "limit", MaxJoinBytes)
		return
	}
	if _, err := conn.Write(appendFrame(nil, kindJoinResp, resp)); err != nil {
		t.log.Info("join answer not delivered", "joiner", h.from, "err", err) // the joiner gave up
	}
}

// Peers returns every peer's id and address, as AddPeer last set it.
func (t *Transport) Peers() map[uint64]string {
	out := map[uint64]string{}
	for id, p := range *t.peers.Load() {
		out[id] = p.address()
	}
	return out
}
