package peer

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/raftgroup"
)

// peer is this node's side of its relation with one other node: the queue
// of batches towards it, and the goroutine that keeps the raft stream to it.
type peer struct {
	t      *Transport
	id     uint64
	log    *slog.Logger
	ctx    context.Context // ends when the peer is removed or the transport closes
	cancel context.CancelFunc

	addr    atomic.Pointer[string]
	queue   chan []raftgroup.Envelope
	inbound chan net.Conn // accepted raft streams, handed to run (acceptor side)

	snapsOut chan struct{} // semaphore: outbound snapshot streams
	snapsIn  atomic.Int32  // inbound snapshot streams

	connected atomic.Bool
	// heard is when the live raft stream last delivered a frame (unix
	// nanoseconds), and remote its far address: a second node claiming
	// this id while the stream is live is refused (see admit).
	heard atomic.Int64
	// lastFrame is when any raft stream last delivered a frame (unix
	// nanoseconds). Unlike heard, a lost connection does not clear it:
	// it is Stats' LastHeard, which a new metadata leader uses to date a
	// broker's silence from before its election.
	lastFrame atomic.Int64
	remote    atomic.Pointer[string]
	stats     peerCounters

	farewell // goodbyes said and heard (farewell.go)

	// fetcher is the fetching side's stream to p: whoever holds the one
	// token owns it (fetch.go), so there is one request outstanding.
	fetcher chan *fetchClient
	// fetchIn is the stream p fetches from this node on, if any.
	fetchIn atomic.Pointer[fetchServer]
}

func newPeer(t *Transport, id uint64, addr string) *peer {
	p := &peer{
		t:        t,
		id:       id,
		log:      t.log.With("peer", id),
		queue:    make(chan []raftgroup.Envelope, t.cfg.QueueSize),
		inbound:  make(chan net.Conn, 1),
		snapsOut: make(chan struct{}, t.cfg.MaxSnapshotsPerPeer),
		farewell: newFarewell(),
		fetcher:  make(chan *fetchClient, 1),
	}
	p.fetcher <- newFetchClient(p)
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.setAddr(addr)
	return p
}

func (p *peer) setAddr(addr string) { p.addr.Store(&addr) }

// liveStream reports whether p's raft stream is connected and has carried
// a frame within window, and from where. A healthy peer sends a frame (a
// batch or a ping) at least every 2*KeepaliveInterval.
func (p *peer) liveStream(window time.Duration) (string, time.Duration, bool) {
	if !p.connected.Load() {
		return "", 0, false
	}
	ago := time.Since(time.Unix(0, p.heard.Load()))
	remote := ""
	if r := p.remote.Load(); r != nil {
		remote = *r
	}
	return remote, ago, ago < window
}

func (p *peer) address() string { return *p.addr.Load() }

// dials reports whether this node opens the raft stream to p: of each pair,
// the node with the lower id dials and the other accepts, so a pair shares
// one connection without a tie-break protocol.
func (p *peer) dials() bool { return p.t.cfg.NodeID < p.id }

// enqueue queues batch without blocking.
func (p *peer) enqueue(batch []raftgroup.Envelope) bool {
	select {
	case p.queue <- batch:
		return true
	default:
		p.stats.dropped.Add(1)
		p.t.stats.dropped.Add(1)
		return false
	}
}

// run owns p's raft stream: it obtains a connection (dialling or waiting
// for the peer to dial), serves it until it fails, and starts over until
// p.ctx ends.
func (p *peer) run() {
	defer p.t.wg.Done()
	defer p.closeInbound()
	if p.dials() {
		p.runDialler()
	} else {
		p.runAcceptor()
	}
}

func (p *peer) runDialler() {
	bo := newBackoff(p.t.cfg.BackoffMin, p.t.cfg.BackoffMax)
	var lastErr string
	for wait := time.Duration(0); ; wait = bo.next() {
		if !p.sleep(wait) {
			return
		}
		conn, err := p.t.dialStream(p.ctx, p, streamRaft)
		if err != nil {
			lastErr = p.logDialError(err, lastErr)
			continue
		}
		lastErr = ""
		began := time.Now()
		for conn != nil { // a dialler never receives a replacement; the loop is for symmetry
			conn = p.serve(conn)
		}
		if p.leavingNow() {
			<-p.ctx.Done()
			return
		}
		if time.Since(began) >= p.t.cfg.BackoffMax {
			bo.reset() // the session was healthy: redial promptly
		}
	}
}

func (p *peer) runAcceptor() {
	for {
		select {
		case conn := <-p.inbound:
			for conn != nil {
				conn = p.serve(conn)
			}
		case <-p.ctx.Done():
			return
		}
	}
}

// sleep waits d or until p.ctx ends; it reports whether to go on.
func (p *peer) sleep(d time.Duration) bool {
	if d <= 0 {
		return p.ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// logDialError logs a failed dial loudly when the reason changes and quietly
// while it repeats, so a peer that stays down does not flood the log.
func (p *peer) logDialError(err error, last string) string {
	if p.ctx.Err() != nil {
		return last
	}
	p.stats.dialErrors.Add(1)
	p.t.stats.dialErrors.Add(1)
	msg := err.Error()
	level := slog.LevelWarn
	switch {
	case msg == last:
		level = slog.LevelDebug
	case isRefusal(err):
		level = slog.LevelError // the nodes disagree on who is who: a misconfiguration
	case p.expectedDown():
		level = slog.LevelInfo
	}
	p.log.Log(p.ctx, level, "cannot connect to peer", "addr", p.address(), "err", err)
	return msg
}

// handover gives an accepted, handshaken raft stream to run, replacing one
// that is waiting there; a serving session notices it and switches over.
func (p *peer) handover(conn net.Conn) {
	for {
		select {
		case p.inbound <- conn:
			if p.ctx.Err() != nil {
				p.closeInbound() // run has exited or is exiting
			}
			return
		default:
		}
		select {
		case old := <-p.inbound:
			old.Close()
		default:
		}
	}
}

func (p *peer) closeInbound() {
	for {
		select {
		case c := <-p.inbound:
			c.Close()
		default:
			return
		}
	}
}
