package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/raftq/raftq/raftgroup"
)

// errReplaced ends a session whose peer dialled anew.
var errReplaced = errors.New("peer: replaced by a newer connection")

// session is one live raft stream. The goroutine running serve writes; a
// second goroutine reads and delivers to the Receiver.
type session struct {
	p        *peer
	conn     net.Conn
	readDone chan error
	readErr  error
	readOver bool
	buf      []byte
	deadline time.Time // write deadline last set
}

// serve runs the raft stream on conn until it fails or p ends. It returns a
// replacement connection when the peer dialled anew meanwhile.
func (p *peer) serve(conn net.Conn) net.Conn {
	s := &session{p: p, conn: conn, readDone: make(chan error, 1)}
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	p.sessionStarted(conn)
	go func() { s.readDone <- p.readLoop(conn) }()
	next, err := s.writeLoop()
	conn.Close()
	stop()
	if !s.readOver {
		// Wait for the reader, so that nothing from the old connection is
		// delivered after the new one's first batch.
		s.readErr = <-s.readDone
	}
	p.sessionEnded(conn, err, s.readErr)
	return next
}

func (p *peer) sessionStarted(conn net.Conn) {
	remote := conn.RemoteAddr().String()
	p.remote.Store(&remote)
	p.heard.Store(time.Now().UnixNano())
	p.connected.Store(true)
	p.leftAt.Store(0)
	p.stats.connects.Add(1)
	p.t.stats.connects.Add(1)
	p.log.Info("peer connected", "local", conn.LocalAddr().String(), "remote", conn.RemoteAddr().String(), "dialled", p.dials())
}

// sessionEnded logs why a session ended, loudest for a corrupt stream.
func (p *peer) sessionEnded(conn net.Conn, writeErr, readErr error) {
	p.connected.Store(false)
	p.stats.disconnects.Add(1)
	p.t.stats.disconnects.Add(1)
	err := writeErr
	if errors.Is(err, errReadEnded) || err == nil {
		err = readErr
	}
	attrs := []any{"remote", conn.RemoteAddr().String(), "err", err}
	switch {
	case errors.Is(err, ErrCorruptFrame) || errors.Is(err, ErrFrameTooLarge):
		p.t.stats.corruptFrames.Add(1)
		p.log.Error("closing peer connection: corrupt stream", attrs...)
	case p.ctx.Err() != nil || errors.Is(err, errReplaced) || errors.Is(err, errLeaving):
		p.log.Info("peer connection closed", attrs...)
	case errors.Is(err, errPeerLeft):
		p.leftAt.Store(time.Now().UnixNano())
		p.log.Info("peer stopped: connection closed", attrs...)
	case errors.Is(err, os.ErrDeadlineExceeded):
		p.log.Warn("closing peer connection: peer silent or not reading", attrs...)
	default:
		p.log.Warn("peer connection lost", attrs...)
	}
}

var errReadEnded = errors.New("peer: reader ended")

// writeLoop drains the queue onto the connection until something ends the
// session.
func (s *session) writeLoop() (net.Conn, error) {
	p := s.p
	keepalive := time.NewTicker(p.t.cfg.KeepaliveInterval)
	defer keepalive.Stop()
	wrote := false
	for {
		select {
		case batch := <-p.queue:
			if err := s.writeBurst(batch); err != nil {
				return nil, err
			}
			wrote = true
		case <-keepalive.C:
			if !wrote {
				if err := s.write(appendFrame(s.buf[:0], kindPing, nil)); err != nil {
					return nil, err
				}
			}
			wrote = false
		case s.readErr = <-s.readDone:
			s.readOver = true
			return nil, errReadEnded
		case next := <-p.inbound:
			return next, errReplaced
		case <-p.leaving:
			s.sayBye()
			return nil, errLeaving
		case <-p.ctx.Done():
			return nil, p.ctx.Err()
		}
	}
}

// writeBurst encodes batch and whatever else is queued and writes it in
// calls of about WriteBufferBytes: under load many batches share a
// syscall, a lone heartbeat goes out at once, and a batch of many large
// messages is written piece by piece, so the buffer stays small enough to
// be reused instead of growing (and being copied) with every burst.
func (s *session) writeBurst(batch []raftgroup.Envelope) error {
	limit := s.p.t.cfg.WriteBufferBytes
	buf := s.buf[:0]
	for {
		sizes, _ := sizeBatch(batch)
		for len(batch) > 0 {
			n := prefixUnder(sizes, limit-len(buf))
			buf = s.encode(buf, batch[:n], sizes[:n])
			batch, sizes = batch[n:], sizes[n:]
			if len(buf) >= limit {
				if err := s.write(buf); err != nil {
					return err
				}
				buf = s.buf[:0]
			}
		}
		select {
		case batch = <-s.p.queue:
			continue
		default:
		}
		return s.write(buf)
	}
}

// prefixUnder returns how many of the first messages, of these sizes, fit
// in room bytes, and at least one.
func prefixUnder(sizes []int, room int) int {
	used := 0
	for i, n := range sizes {
		used += n
		if used >= room {
			return max(i, 1)
		}
	}
	return len(sizes)
}

func (s *session) encode(dst []byte, batch []raftgroup.Envelope, sizes []int) []byte {
	dst, st := appendSized(dst, batch, sizes, envelopeBytes(sizes), s.p.t.cfg.MaxFrameBytes)
	p := s.p
	p.stats.batchesSent.Add(1)
	p.t.stats.batchesSent.Add(1)
	p.t.stats.framesSent.Add(uint64(st.frames))
	p.t.stats.messagesSent.Add(uint64(st.msgs))
	if st.dropped > 0 {
		p.t.stats.messagesDropped.Add(uint64(st.dropped))
		p.log.Error("dropping raft messages that can not be sent", "count", st.dropped, "err", st.firstErr)
	}
	return dst
}

// write sends buf, keeping the write deadline at least 3/4 WriteTimeout
// ahead without paying for a timer update on every write.
func (s *session) write(buf []byte) error {
	s.buf = buf[:0]
	// Keep a large buffer while bursts fill it; drop it once they shrink.
	if cap(s.buf) > shrinkAbove && len(buf) < cap(buf)/4 {
		s.buf = nil
	}
	if len(buf) == 0 {
		return nil
	}
	wt := s.p.t.cfg.WriteTimeout
	if now := time.Now(); s.deadline.Sub(now) < wt*3/4 {
		s.deadline = now.Add(wt)
		if err := s.conn.SetWriteDeadline(s.deadline); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
	}
	n, err := s.conn.Write(buf)
	s.p.stats.bytesSent.Add(uint64(n))
	s.p.t.stats.bytesSent.Add(uint64(n))
	s.p.t.stats.writes.Add(1)
	if err != nil {
		return fmt.Errorf("write %d bytes: %w", len(buf), err)
	}
	return nil
}

// readLoop reads frames and delivers batches until the connection fails or
// a frame is corrupt.
func (p *peer) readLoop(conn net.Conn) error {
	cfg := p.t.cfg
	fr := newFrameReader(conn, cfg.ReadBufferBytes, cfg.MaxFrameBytes)
	var deadline time.Time
	for {
		if now := time.Now(); deadline.Sub(now) < cfg.ReadTimeout*3/4 {
			deadline = now.Add(cfg.ReadTimeout)
			if err := conn.SetReadDeadline(deadline); err != nil {
				return fmt.Errorf("set read deadline: %w", err)
			}
		}
		kind, body, err := fr.next()
		if err != nil {
			p.heard.Store(0) // dead: a redial of this peer is not a duplicate
			return fmt.Errorf("read frame: %w", err)
		}
		now := time.Now().UnixNano()
		p.heard.Store(now)
		p.lastFrame.Store(now)
		p.stats.bytesReceived.Add(uint64(frameHeader + 1 + len(body)))
		p.t.stats.bytesReceived.Add(uint64(frameHeader + 1 + len(body)))
		if err := p.deliver(kind, body); err != nil {
			return err
		}
	}
}

func (p *peer) deliver(kind byte, body []byte) error {
	switch kind {
	case kindPing:
		return nil
	case kindBye:
		return errPeerLeft
	case kindBatch:
		envs, err := decodeBatch(body)
		if err != nil {
			return err
		}
		p.t.stats.framesReceived.Add(1)
		p.t.stats.messagesReceived.Add(uint64(len(envs)))
		p.t.recv.Receive(p.id, envs)
		return nil
	default:
		return fmt.Errorf("%w: frame kind %d on a raft stream", ErrCorruptFrame, kind)
	}
}
