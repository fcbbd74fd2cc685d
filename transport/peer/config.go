package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures a Transport. Start from DefaultConfig and set ClusterID,
// NodeID, ListenAddr and Peers.
type Config struct {
	// ClusterID names the cluster; a peer presenting another one is refused.
	// 1 to 255 bytes.
	ClusterID string
	// NodeID is this node's raft id, never 0.
	NodeID uint64
	// Incarnation names this node's data directory (at most 255 bytes;
	// empty for none). A node whose data was wiped comes back under its old
	// id with a new incarnation, and CheckIncarnation lets its peers keep
	// it out: rejoining raft without the log it acknowledged would let it
	// vote away committed entries.
	Incarnation string
	// CheckIncarnation, if set, judges the incarnation a peer presents, in
	// both directions of the handshake; an error refuses the connection
	// with ErrIncarnation. It must be fast and safe for concurrent use.
	CheckIncarnation func(node uint64, incarnation string) error
	// ListenAddr is where peers connect, e.g. "127.0.0.1:9093".
	ListenAddr string
	// Peers maps the other nodes' ids to their addresses. AddPeer and
	// RemovePeer change the set later. A node not in the set is refused.
	Peers map[uint64]string

	// QueueSize bounds the batches queued towards one peer; Send drops and
	// returns false beyond it.
	QueueSize int
	// MaxFrameBytes bounds one frame on the wire, in both directions. A
	// batch larger than this is split over several frames; a single message
	// larger than this is dropped. A peer sending a larger frame is cut off.
	MaxFrameBytes int
	// WriteBufferBytes is how many bytes of frames the writer gathers from
	// the queue before it writes them to the socket in one call.
	WriteBufferBytes int
	// ReadBufferBytes sizes the reader's bufio.Reader.
	ReadBufferBytes int

	// DialTimeout bounds one TCP dial.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the hello/reply exchange on a new connection.
	HandshakeTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential wait between
	// dial attempts towards one peer.
	BackoffMin, BackoffMax time.Duration
	// KeepaliveInterval is how often an otherwise idle connection carries a
	// ping frame, so that a silent peer (partitioned, paused) is noticed even
	// while every raft group is quiescent.
	KeepaliveInterval time.Duration
	// ReadTimeout is how long a connection may stay silent before it is
	// closed and redialled. It must exceed KeepaliveInterval.
	ReadTimeout time.Duration
	// WriteTimeout bounds one socket write; a peer that stops reading for
	// this long is cut off.
	WriteTimeout time.Duration

	// StartupGrace is how long after Start failed dials to a peer never
	// reached yet are logged at info rather than warn (nodes of a cluster
	// start one after another, and the first ones cannot reach the rest),
	// and how long after a peer said goodbye (a clean stop) its restart
	// may take before failed dials to it are warnings again.
	StartupGrace time.Duration

	// SnapshotChunkBytes is the size of the chunks a snapshot body travels
	// in. At most MaxFrameBytes-1.
	SnapshotChunkBytes int
	// MaxSnapshotsPerPeer bounds concurrent snapshot streams towards one
	// peer, and accepted from one peer.
	MaxSnapshotsPerPeer int
	// SnapshotAckTimeout bounds the wait, after the last body byte, for the
	// receiver's verdict.
	SnapshotAckTimeout time.Duration

	// FetchHandler answers the fetch requests peers send with Fetch: from
	// is the fetching node, deadline the fetcher's (the handler may
	// long-poll until it, and should answer by it). It runs on a goroutine
	// of its own per fetch stream, so calls for one peer are sequential
	// and calls for different peers concurrent; req is the handler's to
	// keep. nil refuses fetch streams with ErrNoFetchHandler.
	FetchHandler func(from uint64, req []byte, deadline time.Time) []byte
	// JoinHandler answers a node that asks to join the cluster (Join):
	// from and incarnation are what its hello presented, req its request;
	// ctx ends at JoinTimeout or Close. The joining node need not be among
	// the peers. nil refuses join streams with ErrNoJoinHandler.
	JoinHandler func(ctx context.Context, from uint64, incarnation string, req []byte) []byte
	// MaxFetchBytes bounds one fetch request and one fetch response, in
	// both directions. A larger one is refused with ErrFetchTooLarge and
	// the stream goes on.
	MaxFetchBytes int

	// ServerTLS and ClientTLS, set together or not at all, put every
	// connection on the peer port under TLS (see the package
	// documentation, TLS): accepted ones handshake as a TLS server with
	// ServerTLS before the hello is read, dialled ones as a client with
	// ClientTLS before it is written. For mutual TLS, ServerTLS requires
	// and verifies client certificates (tls.RequireAndVerifyClientCert)
	// and ClientTLS presents one; tlsfiles.Store's ServerConfig and
	// ClientConfig("") do both and verify the chain only. A ClientTLS with
	// neither ServerName nor InsecureSkipVerify verifies the dialled
	// host name. Nil for both: plain TCP.
	ServerTLS, ClientTLS *tls.Config
	// CheckPeerCertificate, with TLS, judges the certificate a peer
	// presented, whose chain TLS verified, against the node id it
	// stands for: on an accepted stream the id its hello claims (a
	// joiner's included), on a dialled one the id dialled. An error
	// refuses the stream with ErrCertificate. It must be fast and safe
	// for concurrent use. nil takes any certificate of the CA for any
	// node.
	CheckPeerCertificate func(node uint64, cert *x509.Certificate) error

	// Logger receives the transport's logs; nil discards them.
	Logger *slog.Logger
	// Listen opens the listener; nil means net.Listen.
	Listen func(network, addr string) (net.Listener, error)
	// Dial opens outbound connections; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultConfig returns a Config with every tunable set; ClusterID, NodeID
// and Peers are left for the caller.
func DefaultConfig() Config {
	return Config{
		ListenAddr:          "127.0.0.1:9093",
		QueueSize:           1024,
		MaxFrameBytes:       16 << 20,
		WriteBufferBytes:    256 << 10,
		ReadBufferBytes:     64 << 10,
		DialTimeout:         2 * time.Second,
		HandshakeTimeout:    5 * time.Second,
		BackoffMin:          50 * time.Millisecond,
		BackoffMax:          2 * time.Second,
		KeepaliveInterval:   time.Second,
		ReadTimeout:         5 * time.Second,
		WriteTimeout:        10 * time.Second,
		StartupGrace:        10 * time.Second,
		SnapshotChunkBytes:  256 << 10,
		MaxSnapshotsPerPeer: 2,
		SnapshotAckTimeout:  time.Minute,
		MaxFetchBytes:       64 << 20,
	}
}

// minFrameBytes keeps MaxFrameBytes large enough for any handshake-era
// control frame and a useful raft message.
const minFrameBytes = 4 << 10

// maxClusterID is the longest cluster id the handshake can carry.
const maxClusterID = 255

// Validate reports the first problem with c.
func (c Config) Validate() error {
	for _, check := range []func() error{c.validateIdentity, c.validatePeers, c.validateSizes, c.validateTimes} {
		if err := check(); err != nil {
			return fmt.Errorf("peer config: %w", err)
		}
	}
	return nil
}

func (c Config) validateIdentity() error {
	if len(c.Incarnation) > maxClusterID {
		return fmt.Errorf("incarnation of %d bytes, limit %d", len(c.Incarnation), maxClusterID)
	}
	if c.ClusterID == "" || len(c.ClusterID) > maxClusterID {
		return fmt.Errorf("cluster id must be 1 to %d bytes, got %d", maxClusterID, len(c.ClusterID))
	}
	if c.NodeID == 0 {
		return fmt.Errorf("node id must not be 0")
	}
	if c.ListenAddr == "" {
		return fmt.Errorf("listen address is empty")
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		return fmt.Errorf("server and client TLS configs must be set together (server %t, client %t)", c.ServerTLS != nil, c.ClientTLS != nil)
	}
	return nil
}

func (c Config) validatePeers() error {
	for id, addr := range c.Peers {
		if id == 0 || id == c.NodeID {
			return fmt.Errorf("peer id %d is 0 or this node's own id", id)
		}
		if addr == "" {
			return fmt.Errorf("peer %d has no address", id)
		}
	}
	return nil
}

func (c Config) validateSizes() error {
	switch {
	case c.QueueSize < 1:
		return fmt.Errorf("queue size %d < 1", c.QueueSize)
	case c.MaxFrameBytes < minFrameBytes || c.MaxFrameBytes > maxFrameLimit:
		return fmt.Errorf("max frame bytes %d outside [%d, %d]", c.MaxFrameBytes, minFrameBytes, maxFrameLimit)
	case c.WriteBufferBytes < 1 || c.ReadBufferBytes < 16:
		return fmt.Errorf("buffer sizes %d/%d too small", c.WriteBufferBytes, c.ReadBufferBytes)
	case c.SnapshotChunkBytes < 1 || c.SnapshotChunkBytes >= c.MaxFrameBytes:
		return fmt.Errorf("snapshot chunk bytes %d outside [1, max frame bytes %d)", c.SnapshotChunkBytes, c.MaxFrameBytes)
	case c.MaxFetchBytes < minFrameBytes || c.MaxFetchBytes > maxFrameLimit-fetchOverhead:
		return fmt.Errorf("max fetch bytes %d outside [%d, %d]", c.MaxFetchBytes, minFrameBytes, maxFrameLimit-fetchOverhead)
	case c.MaxSnapshotsPerPeer < 1:
		return fmt.Errorf("max snapshots per peer %d < 1", c.MaxSnapshotsPerPeer)
	}
	return nil
}

func (c Config) validateTimes() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"dial timeout", c.DialTimeout}, {"handshake timeout", c.HandshakeTimeout},
		{"backoff min", c.BackoffMin}, {"keepalive interval", c.KeepaliveInterval},
		{"write timeout", c.WriteTimeout}, {"snapshot ack timeout", c.SnapshotAckTimeout},
	} {
		if f.d <= 0 {
			return fmt.Errorf("%s %v must be positive", f.name, f.d)
		}
	}
	if c.BackoffMax < c.BackoffMin {
		return fmt.Errorf("backoff max %v < backoff min %v", c.BackoffMax, c.BackoffMin)
	}
	if c.ReadTimeout <= c.KeepaliveInterval {
		return fmt.Errorf("read timeout %v must exceed keepalive interval %v", c.ReadTimeout, c.KeepaliveInterval)
	}
	return nil
}
