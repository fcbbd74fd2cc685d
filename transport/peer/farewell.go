package peer

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A node that stops cleanly says goodbye on each raft stream (a kindBye
// frame) before it hangs up, so that its peers can tell a shutdown from a
// failure: they log the end of the stream, and their failed redials until
// the node is back (for Config.StartupGrace), at info instead of warn.
// Failed dials to a peer not reached since Start are quiet for
// StartupGrace too, since nodes start one after another.

// farewell is one peer's share of that.
type farewell struct {
	leaving chan struct{} // closed by Transport.Close: say goodbye
	saidBye chan struct{} // closed once the goodbye is written, or cannot be
	byeOnce sync.Once
	leftAt  atomic.Int64 // when the peer said goodbye (unix ns), 0 once it reconnects
}

func newFarewell() farewell {
	return farewell{leaving: make(chan struct{}), saidBye: make(chan struct{})}
}

// errPeerLeft ends a session whose peer said goodbye.
var errPeerLeft = errors.New("peer: the peer is stopping")

// errLeaving ends a session after this node said goodbye.
var errLeaving = errors.New("peer: this node is stopping")

// byeWait bounds how long Close waits for the goodbyes to be written.
const byeWait = 500 * time.Millisecond

func (p *peer) leavingNow() bool {
	select {
	case <-p.leaving:
		return true
	default:
		return false
	}
}

// sayBye writes the goodbye frame, briefly: a peer that does not read
// gets no goodbye.
func (s *session) sayBye() {
	defer s.p.byeOnce.Do(func() { close(s.p.saidBye) })
	s.deadline = time.Time{}
	if err := s.conn.SetWriteDeadline(time.Now().Add(byeWait)); err != nil {
		return
	}
	_, _ = s.conn.Write(appendFrame(s.buf[:0], kindBye, nil))
}

// sayGoodbye asks every peer's live stream to say goodbye and waits, up
// to byeWait in all, for those to be written.
func (t *Transport) sayGoodbye() {
	peers := *t.peers.Load()
	for _, p := range peers {
		close(p.leaving)
	}
	deadline := time.NewTimer(byeWait)
	defer deadline.Stop()
	for _, p := range peers {
		if !p.connected.Load() {
			continue
		}
		select {
		case <-p.saidBye:
		case <-deadline.C:
			return
		}
	}
}

// expectedDown reports whether a failed dial to p is expected: p said
// goodbye within StartupGrace (a restart takes that long at most), or has
// not been reached since Start, within StartupGrace of it. A peer that
// stays away longer is warned about as any other.
func (p *peer) expectedDown() bool {
	grace := p.t.cfg.StartupGrace
	if at := p.leftAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < grace {
		return true
	}
	return p.stats.connects.Load() == 0 && time.Since(p.t.startedAt) < grace
}
