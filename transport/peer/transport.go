package peer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/raftgroup"
)

var _ raftgroup.Transport = (*Transport)(nil)

// Transport carries raft traffic between this node and its peers over TCP.
// See the package documentation for the wire format and goroutines.
type Transport struct {
	cfg  Config
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	// peers is copied on write under mu, so Send reads it without a lock.
	peers   atomic.Pointer[map[uint64]*peer]
	stats   counters
	closing atomic.Bool // set first thing in Close; Send checks it without a lock

	mu        sync.Mutex // guards the fields below and writes to peers
	recv      raftgroup.Receiver
	ln        net.Listener
	started   bool
	startedAt time.Time
	closed    bool
}

// New checks cfg and builds a Transport. Nothing listens or dials until
// Start; Send queues meanwhile.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Peers = maps.Clone(cfg.Peers)
	t := &Transport{cfg: cfg, log: logging.Discard(cfg.Logger).With("node", cfg.NodeID)}
	t.ctx, t.stop = context.WithCancel(context.Background())
	m := make(map[uint64]*peer, len(cfg.Peers))
	for id, addr := range cfg.Peers {
		m[id] = newPeer(t, id, addr)
	}
	t.peers.Store(&m)
	return t, nil
}

// Start listens on cfg.ListenAddr, delivers inbound traffic to r, and starts
// connecting to the peers.
func (t *Transport) Start(r raftgroup.Receiver) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return ErrClosed
	case t.started:
		return ErrStarted
	}
	ln, err := t.listen("tcp", t.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", t.cfg.ListenAddr, err)
	}
	t.ln, t.recv, t.started, t.startedAt = ln, r, true, time.Now()
	t.wg.Add(1)
	go t.acceptLoop(ln)
	for _, p := range *t.peers.Load() {
		t.startPeer(p)
	}
	t.log.Info("peer transport listening", "addr", ln.Addr().String(), "cluster", t.cfg.ClusterID)
	return nil
}

func (t *Transport) listen(network, addr string) (net.Listener, error) {
	if t.cfg.Listen != nil {
		return t.cfg.Listen(network, addr)
	}
	return net.Listen(network, addr)
}

func (t *Transport) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.cfg.Dial != nil {
		return t.cfg.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// startPeer runs p's connection loop. Callers hold mu.
func (t *Transport) startPeer(p *peer) {
	t.wg.Add(1)
	go p.run()
}

// Addr returns the address the transport listens on, or nil before Start.
func (t *Transport) Addr() net.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

// AddPeer adds node id at addr, or changes the address of a known node; the
// new address is used from the next dial on.
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == 0 || id == t.cfg.NodeID || addr == "" {
		t.log.Warn("ignoring invalid peer", "peer", id, "addr", addr)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p, ok := (*t.peers.Load())[id]; ok {
		p.setAddr(addr)
		return
	}
	p := newPeer(t, id, addr)
	t.swapPeers(func(m map[uint64]*peer) { m[id] = p })
	if t.started {
		t.startPeer(p)
	}
}

// RemovePeer forgets node id: its queue is dropped, its connections and
// snapshot streams are closed, and it is refused from now on.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := (*t.peers.Load())[id]
	if !ok {
		return
	}
	t.swapPeers(func(m map[uint64]*peer) { delete(m, id) })
	p.cancel()
}

// swapPeers publishes a modified copy of the peer map. Callers hold mu.
func (t *Transport) swapPeers(edit func(map[uint64]*peer)) {
	m := maps.Clone(*t.peers.Load())
	edit(m)
	t.peers.Store(&m)
}

func (t *Transport) peer(id uint64) *peer {
	return (*t.peers.Load())[id]
}

// Send queues batch for node to without blocking; false means it was dropped
// because the queue towards to is full, to is unknown, or the transport is
// closed.
func (t *Transport) Send(to uint64, batch []raftgroup.Envelope) bool {
	p := t.peer(to)
	if p == nil || t.closing.Load() {
		t.stats.dropped.Add(1)
		return false
	}
	return p.enqueue(batch)
}

// Close stops listening, closes every connection and snapshot stream, and
// waits for the transport's goroutines to end. Pending snapshot callbacks
// get ErrClosed. Close is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.closing.Store(true)
	if t.started {
		t.sayGoodbye()
	}
	t.stop()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	if err != nil {
		return fmt.Errorf("close listener: %w", err)
	}
	return nil
}

// goTracked runs fn on a goroutine that Close waits for, unless the
// transport is closed; it reports whether fn was started.
func (t *Transport) goTracked(fn func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		fn()
	}()
	return true
}
