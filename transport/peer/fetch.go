package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// A fetch stream is a TCP connection the fetching node dials (whatever the
// ids) with hello stream streamFetch; it then carries one request and its
// answer at a time (see the package documentation):
//
//	kindFetchReq   budget uint64 (ns the fetcher will wait), then the request
//	kindFetchResp  the response
//	kindFetchErr   code byte (fetchErrTooLarge), then a reason text
const (
	kindFetchReq byte = kindBye + 1 + iota
	kindFetchResp
	kindFetchErr
)

const (
	fetchErrTooLarge byte = 1
	fetchReqFixed         = 8
	// fetchOverhead is what a frame adds to a fetch payload: kind byte and
	// budget.
	fetchOverhead = 1 + fetchReqFixed
	// maxDeadlineMargin caps how much earlier than the fetcher's deadline
	// the handler is asked to answer, leaving the answer time to travel.
	maxDeadlineMargin = 50 * time.Millisecond
)

// fetchFrame is one decoded frame of a fetch stream.
type fetchFrame struct {
	kind   byte
	budget time.Duration // kindFetchReq
	code   byte          // kindFetchErr
	body   []byte        // request, response or reason; aliases the frame
}

// decodeFetchFrame checks one frame of a fetch stream.
func decodeFetchFrame(kind byte, body []byte) (fetchFrame, error) {
	f := fetchFrame{kind: kind}
	switch kind {
	case kindFetchReq:
		if len(body) < fetchReqFixed {
			return f, fmt.Errorf("%w: fetch request of %d bytes, shorter than its budget", ErrCorruptFrame, len(body))
		}
		b := binary.BigEndian.Uint64(body)
		if b == 0 || b > uint64(maxBudget) {
			return f, fmt.Errorf("%w: fetch request budget %d ns outside (0, %v]", ErrCorruptFrame, b, maxBudget)
		}
		f.budget, f.body = time.Duration(b), body[fetchReqFixed:]
	case kindFetchResp:
		f.body = body
	case kindFetchErr:
		if len(body) == 0 || body[0] != fetchErrTooLarge || len(body) > 1+maxAckMsg {
			return f, fmt.Errorf("%w: fetch error frame of %d bytes", ErrCorruptFrame, len(body))
		}
		f.code, f.body = body[0], body[1:]
	default:
		return f, fmt.Errorf("%w: frame kind %d on a fetch stream", ErrCorruptFrame, kind)
	}
	return f, nil
}

// maxBudget bounds the wait a request may announce, so that a hostile
// value cannot overflow a deadline.
const maxBudget = 24 * time.Hour

// fetchHead returns the header, kind and prefix of a frame whose payload
// follows: written together with net.Buffers, a large payload is not copied.
func fetchHead(kind byte, prefix, payload []byte) []byte {
	h := make([]byte, frameHeader+1, frameHeader+1+len(prefix))
	h[frameHeader] = kind
	h = append(h, prefix...)
	crc := crc32.Update(crc32.Checksum(h[frameHeader:], castagnoli), castagnoli, payload)
	binary.BigEndian.PutUint32(h, uint32(len(h)-frameHeader+len(payload)))
	binary.BigEndian.PutUint32(h[4:], crc)
	return h
}

// fetchPrefix is what a frame of f's kind holds before its payload.
func fetchPrefix(f fetchFrame) []byte {
	switch f.kind {
	case kindFetchReq:
		return binary.BigEndian.AppendUint64(nil, uint64(f.budget))
	case kindFetchErr:
		return []byte{f.code}
	}
	return nil
}

func appendFetchFrame(dst []byte, f fetchFrame) []byte {
	return append(append(dst, fetchHead(f.kind, fetchPrefix(f), f.body)...), f.body...)
}

func fetchErrFrame(reason string) fetchFrame {
	return fetchFrame{kind: kindFetchErr, code: fetchErrTooLarge, body: []byte(reason[:min(len(reason), maxAckMsg)])}
}

// writeFetch writes one frame to conn without copying its payload.
func writeFetch(conn net.Conn, timeout time.Duration, f fetchFrame) (int, error) {
	head := fetchHead(f.kind, fetchPrefix(f), f.body)
	if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return 0, fmt.Errorf("set write deadline: %w", err)
	}
	bufs := net.Buffers{head, f.body}
	n, err := bufs.WriteTo(conn)
	if err != nil {
		return int(n), fmt.Errorf("write %d bytes: %w", len(head)+len(f.body), err)
	}
	return int(n), nil
}

// fetchFrameMax is the frame limit of a fetch stream.
func fetchFrameMax(c Config) int { return c.MaxFetchBytes + fetchOverhead }

// skipFrame discards the body of the frame next refused as too large, so
// that the stream stays in step.
func (fr *frameReader) skipFrame(conn net.Conn, timeout time.Duration) error {
	n := int64(binary.BigEndian.Uint32(fr.hdr[:4]))
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("set read deadline: %w", err)
	}
	if _, err := io.CopyN(io.Discard, fr.r, n); err != nil {
		return fmt.Errorf("skip %d bytes of an oversized frame: %w", n, noEOF(err))
	}
	return nil
}

// ---- fetching side

// fetchClient is the fetching side of the stream to one peer. Only the
// holder of the peer's fetcher token touches it.
type fetchClient struct {
	p        *peer
	conn     net.Conn
	fr       *frameReader
	unwatch  func() bool // stops closing conn when p ends
	bo       *backoff
	nextDial time.Time
	lastErr  error
	dropped  time.Time // when this side last closed a stream
}

func newFetchClient(p *peer) *fetchClient {
	return &fetchClient{p: p, bo: newBackoff(p.t.cfg.BackoffMin, p.t.cfg.BackoffMax)}
}

// Fetch sends req to node to on the fetch stream towards it and returns the
// response of to's FetchHandler. One request is outstanding per peer:
// concurrent calls for one peer wait their turn (bounded by ctx). ctx's
// deadline, or ReadTimeout without one, travels to the handler, slightly
// shortened so that its answer arrives in time. The stream is dialled on
// first use, reused, and redialled with backoff after a failure.
func (t *Transport) Fetch(ctx context.Context, to uint64, req []byte) ([]byte, error) {
	resp, err := t.fetch(ctx, to, req)
	if err != nil {
		t.stats.fetchErrors.Add(1)
		return nil, fmt.Errorf("fetch from node %d: %w", to, err)
	}
	return resp, nil
}

func (t *Transport) fetch(ctx context.Context, to uint64, req []byte) ([]byte, error) {
	p := t.peer(to)
	switch {
	case t.closing.Load():
		return nil, ErrClosed
	case p == nil:
		return nil, ErrUnknownPeer
	case len(req) > t.cfg.MaxFetchBytes:
		return nil, fmt.Errorf("%w: request of %d bytes, limit %d", ErrFetchTooLarge, len(req), t.cfg.MaxFetchBytes)
	}
	var fc *fetchClient
	select {
	case fc = <-p.fetcher:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the fetch stream: %w", ctx.Err())
	case <-p.ctx.Done():
		return nil, p.endedErr()
	}
	defer func() { p.fetcher <- fc }()
	return fc.roundTrip(ctx, req)
}

// endedErr says why p's context ended.
func (p *peer) endedErr() error {
	if p.t.closing.Load() {
		return ErrClosed
	}
	return fmt.Errorf("%w: node %d was removed", ErrUnknownPeer, p.id)
}

func (fc *fetchClient) roundTrip(ctx context.Context, req []byte) ([]byte, error) {
	if fc.conn == nil {
		if err := fc.connect(ctx); err != nil {
			return nil, err
		}
	}
	budget := fc.p.t.cfg.ReadTimeout
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if budget <= 0 {
		return nil, context.DeadlineExceeded
	}
	budget = min(budget, maxBudget)
	fired := make(chan struct{})
	conn := fc.conn
	stop := context.AfterFunc(ctx, func() {
		conn.SetDeadline(time.Unix(1, 0)) // interrupts the I/O under way
		close(fired)
	})
	resp, err := fc.exchange(ctx, req, budget)
	if !stop() {
		<-fired // the deadline it set must not outlive this call
	}
	if err != nil {
		return nil, fc.fail(ctx, err)
	}
	fc.bo.reset()
	fc.nextDial, fc.lastErr = time.Time{}, nil
	return resp, nil
}

// exchange writes the request and reads its answer.
func (fc *fetchClient) exchange(ctx context.Context, req []byte, budget time.Duration) ([]byte, error) {
	t := fc.p.t
	n, err := writeFetch(fc.conn, t.cfg.WriteTimeout, fetchFrame{kind: kindFetchReq, budget: budget, body: req})
	t.stats.fetchBytesSent.Add(uint64(n))
	if err != nil {
		return nil, err
	}
	t.stats.fetchRequests.Add(1)
	if err := fc.conn.SetReadDeadline(time.Now().Add(budget)); err != nil {
		return nil, fmt.Errorf("set read deadline: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // ended before the deadlines above were set: they hide its poison
	}
	kind, body, err := fc.fr.next()
	if errors.Is(err, ErrFrameTooLarge) {
		if serr := fc.fr.skipFrame(fc.conn, t.cfg.ReadTimeout); serr != nil {
			return nil, serr
		}
		return nil, &keepStream{fmt.Errorf("%w: response: %w", ErrFetchTooLarge, err)}
	}
	if err != nil {
		return nil, err
	}
	t.stats.fetchBytesReceived.Add(uint64(frameHeader + 1 + len(body)))
	f, err := decodeFetchFrame(kind, body)
	switch {
	case err != nil:
		return nil, err
	case f.kind == kindFetchResp:
		return append([]byte(nil), f.body...), nil
	case f.kind == kindFetchErr:
		return nil, &keepStream{fmt.Errorf("%w: node %d says: %s", ErrFetchTooLarge, fc.p.id, f.body)}
	}
	return nil, fmt.Errorf("%w: a fetch request where its answer belongs", ErrCorruptFrame)
}

// keepStream marks an error after which the stream is still in step.
type keepStream struct{ err error }

func (k *keepStream) Error() string { return k.err.Error() }
func (k *keepStream) Unwrap() error { return k.err }

// fail decides what a failed exchange leaves of the stream and what the
// caller is told.
func (fc *fetchClient) fail(ctx context.Context, err error) error {
	var keep *keepStream
	if errors.As(err, &keep) {
		return keep.err
	}
	fc.drop()
	p := fc.p
	switch {
	case p.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", p.endedErr(), err)
	case ctx.Err() != nil:
		return fmt.Errorf("%w (stream closed: %w)", ctx.Err(), err) // the answer, if any, would be out of step
	case errors.Is(err, ErrCorruptFrame):
		p.t.stats.corruptFrames.Add(1)
		p.log.Error("closing fetch stream: corrupt stream", "err", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: no answer within the budget: %w", ErrFetchAborted, err)
		p.log.Warn("closing fetch stream: peer silent", "err", err)
	default:
		err = fmt.Errorf("%w: %w", ErrFetchAborted, err)
		p.log.Warn("fetch stream lost", "err", err)
	}
	fc.nextDial = time.Now().Add(fc.bo.next())
	fc.lastErr = err
	return err
}

func (fc *fetchClient) drop() {
	if fc.conn == nil {
		return
	}
	fc.unwatch()
	fc.conn.Close()
	fc.conn, fc.fr, fc.dropped = nil, nil, time.Now()
}

// connect dials the stream, first waiting out the backoff of a failure.
func (fc *fetchClient) connect(ctx context.Context) error {
	p := fc.p
	if wait := time.Until(fc.nextDial); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting to redial after: %w)", ctx.Err(), fc.lastErr)
		case <-p.ctx.Done():
			return p.endedErr()
		}
	}
	conn, err := fc.dial(ctx)
	if err != nil {
		p.t.stats.fetchDialErrors.Add(1)
		if p.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", p.endedErr(), err)
		}
		if ctx.Err() == nil {
			fc.nextDial = time.Now().Add(fc.bo.next())
			fc.lastErr = err
			p.log.Warn("cannot open fetch stream", "addr", p.address(), "err", err)
		}
		return err
	}
	p.t.stats.fetchDials.Add(1)
	fc.conn = conn
	fc.fr = newFrameReader(conn, p.t.cfg.ReadBufferBytes, fetchFrameMax(p.t.cfg))
	fc.unwatch = context.AfterFunc(p.ctx, func() { conn.Close() })
	p.log.Debug("fetch stream open", "remote", conn.RemoteAddr().String())
	return nil
}

// dial opens the stream. A refusal as a duplicate soon after this side
// closed its previous stream means the leader has not yet seen that one
// end (it counts as live while a request is in flight): that is retried,
// with backoff, within ctx. A node that had no stream gets the refusal.
func (fc *fetchClient) dial(ctx context.Context) (net.Conn, error) {
	p := fc.p
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	bo := newBackoff(p.t.cfg.BackoffMin, p.t.cfg.BackoffMax)
	for {
		conn, err := p.t.dialStream(dctx, p, streamFetch)
		if err == nil || !errors.Is(err, ErrDuplicateID) || time.Since(fc.dropped) > p.t.liveWindow() {
			return conn, err
		}
		p.log.Debug("fetch stream refused while the leader reaps the previous one; retrying", "err", err)
		if !sleepCtx(dctx, bo.next()) {
			return nil, fmt.Errorf("%w (redialling after: %w)", dctx.Err(), err)
		}
	}
}

// ---- serving side

// fetchServer is the serving side of one inbound fetch stream.
type fetchServer struct {
	conn     net.Conn
	remote   string
	open     atomic.Bool
	inFlight atomic.Bool
	heard    atomic.Int64 // unix ns of the last request
	calls    chan fetchCall
	done     chan struct{} // closed once its handler goroutine has ended
}

// fetchCall is a request for the handler goroutine, or (tooLarge > 0) the
// notice that a request was too large to read.
type fetchCall struct {
	req      []byte
	deadline time.Time
	tooLarge int
}

// liveFetchStream reports whether p's inbound fetch stream is open and
// either has a request in flight or carried one within window.
func (p *peer) liveFetchStream(window time.Duration) (string, time.Duration, bool) {
	s := p.fetchIn.Load()
	if s == nil || !s.open.Load() {
		return "", 0, false
	}
	ago := time.Since(time.Unix(0, s.heard.Load()))
	return s.remote, ago, s.inFlight.Load() || ago < window
}

// serveFetch serves an accepted fetch stream: this goroutine reads
// requests, a second one runs the handler and writes the answers.
func (p *peer) serveFetch(conn net.Conn) {
	s := &fetchServer{conn: conn, remote: conn.RemoteAddr().String(), calls: make(chan fetchCall, 1), done: make(chan struct{})}
	s.heard.Store(time.Now().UnixNano())
	s.open.Store(true)
	defer context.AfterFunc(p.ctx, func() { conn.Close() })() // RemovePeer ends it too
	if old := p.fetchIn.Swap(s); old != nil {
		// Admitted only because old is no longer live. Its handler may
		// still run (the fetcher gave up on a long poll): wait, so that
		// calls for one fetcher never overlap or run out of order.
		old.conn.Close()
		select {
		case <-old.done:
		case <-p.ctx.Done():
		}
	}
	go func() {
		defer close(s.done)
		p.answerFetches(s)
	}()
	err := p.readFetches(s)
	s.open.Store(false)
	conn.Close()
	close(s.calls)
	<-s.done
	p.fetchIn.CompareAndSwap(s, nil)
	attrs := []any{"remote", s.remote, "err", err}
	switch {
	case errors.Is(err, ErrCorruptFrame):
		p.t.stats.corruptFrames.Add(1)
		p.log.Error("closing fetch stream: corrupt stream", attrs...)
	case p.ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		p.log.Debug("fetch stream closed", attrs...)
	default:
		p.log.Warn("fetch stream lost", attrs...)
	}
}

// readFetches reads requests and passes them to the handler goroutine
// until the stream ends or breaks.
func (p *peer) readFetches(s *fetchServer) error {
	cfg := p.t.cfg
	fr := newFrameReader(s.conn, cfg.ReadBufferBytes, fetchFrameMax(cfg))
	for {
		// No read deadline between requests: a fetcher may pause. TCP
		// keepalive (on by default for accepted connections) ends a
		// stream whose peer vanished.
		if err := s.conn.SetReadDeadline(time.Time{}); err != nil {
			return fmt.Errorf("clear read deadline: %w", err)
		}
		kind, body, err := fr.next()
		if errors.Is(err, ErrFrameTooLarge) {
			if !s.inFlight.CompareAndSwap(false, true) {
				return fmt.Errorf("%w: a second request while one is outstanding", ErrCorruptFrame)
			}
			s.heard.Store(time.Now().UnixNano())
			n := int(binary.BigEndian.Uint32(fr.hdr[:4]))
			s.calls <- fetchCall{tooLarge: n - fetchOverhead}
			if err := fr.skipFrame(s.conn, cfg.ReadTimeout); err != nil {
				return err
			}
			p.t.stats.fetchServedBytesIn.Add(uint64(frameHeader + n))
			continue
		}
		if err != nil {
			return fmt.Errorf("read fetch request: %w", err)
		}
		arrived := time.Now()
		p.t.stats.fetchServedBytesIn.Add(uint64(frameHeader + 1 + len(body)))
		f, err := decodeFetchFrame(kind, body)
		if err != nil {
			return err
		}
		if f.kind != kindFetchReq {
			return fmt.Errorf("%w: frame kind %d where a fetch request belongs", ErrCorruptFrame, kind)
		}
		if !s.inFlight.CompareAndSwap(false, true) {
			return fmt.Errorf("%w: a second request while one is outstanding", ErrCorruptFrame)
		}
		s.heard.Store(arrived.UnixNano())
		margin := min(f.budget/10, maxDeadlineMargin)
		s.calls <- fetchCall{req: append([]byte(nil), f.body...), deadline: arrived.Add(f.budget - margin)}
	}
}

// answer runs the handler for c, or refuses it.
func (p *peer) answer(c fetchCall) fetchFrame {
	cfg := p.t.cfg
	if c.tooLarge > 0 {
		p.t.stats.fetchServeErrors.Add(1)
		p.log.Warn("refusing fetch request: too large", "bytes", c.tooLarge, "limit", cfg.MaxFetchBytes)
		return fetchErrFrame(fmt.Sprintf("request of %d bytes, limit %d", c.tooLarge, cfg.MaxFetchBytes))
	}
	resp := cfg.FetchHandler(p.id, c.req, c.deadline)
	p.t.stats.fetchesServed.Add(1)
	if len(resp) > cfg.MaxFetchBytes {
		p.t.stats.fetchServeErrors.Add(1)
		p.log.Error("fetch handler answered more than max fetch bytes", "bytes", len(resp), "limit", cfg.MaxFetchBytes)
		return fetchErrFrame(fmt.Sprintf("response of %d bytes, limit %d", len(resp), cfg.MaxFetchBytes))
	}
	return fetchFrame{kind: kindFetchResp, body: resp}
}

// answerFetches runs the handler for each request and writes its answer.
// It is the stream's only writer.
func (p *peer) answerFetches(s *fetchServer) {
	cfg := p.t.cfg
	for c := range s.calls {
		f := p.answer(c)
		// Before the write: the fetcher may send its next request as soon
		// as it has this answer.
		s.inFlight.Store(false)
		n, err := writeFetch(s.conn, cfg.WriteTimeout, f)
		p.t.stats.fetchServedBytesOut.Add(uint64(n))
		if err != nil {
			p.t.stats.fetchServeErrors.Add(1)
			s.conn.Close() // ends the reader, which closes calls
			for range s.calls {
			}
			return
		}
	}
}
