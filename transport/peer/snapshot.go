package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/raftq/raftq/raftgroup"
	"google.golang.org/protobuf/proto"
)

// A snapshot stream is its own TCP connection, dialled by the sender for one
// snapshot: hello (streamSnapshot), one kindBatch frame holding the MsgSnap
// envelope, kindChunk frames of body, a kindEnd frame; then the receiver
// answers one kindAck frame once its ReceiveSnapshot has returned, and both
// close. Ack body: status byte (0 ok, 1 failed), then the error text.
const (
	ackOK     byte = 0
	ackFailed byte = 1
	maxAckMsg      = 4 << 10
)

// SendSnapshot streams env and body to node to on a connection of its own.
// It returns at once; done gets nil once the receiver's ReceiveSnapshot has
// returned nil, or the error that ended the stream (ErrSnapshotFailed wraps
// the receiver's own error). body is closed before done is called.
func (t *Transport) SendSnapshot(to uint64, env raftgroup.Envelope, body io.ReadCloser, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	finish := func(err error) {
		if body != nil {
			body.Close()
		}
		if err != nil {
			t.stats.snapshotsFailed.Add(1)
		} else {
			t.stats.snapshotsSent.Add(1)
		}
		done(err)
	}
	p := t.peer(to)
	if p == nil {
		finish(fmt.Errorf("%w: snapshot for node %d", ErrUnknownPeer, to))
		return
	}
	head, err := encodeSnapshotHead(&env, t.cfg.MaxFrameBytes)
	if err != nil {
		finish(err)
		return
	}
	select {
	case p.snapsOut <- struct{}{}:
	default:
		finish(fmt.Errorf("%w: %d streams to node %d under way", ErrSnapshotBusy, cap(p.snapsOut), to))
		return
	}
	started := t.goTracked(func() {
		defer func() { <-p.snapsOut }()
		finish(p.sendSnapshot(head, body))
	})
	if !started {
		<-p.snapsOut
		finish(ErrClosed)
	}
}

// encodeSnapshotHead frames the MsgSnap envelope.
func encodeSnapshotHead(env *raftgroup.Envelope, max int) ([]byte, error) {
	m := env.Msg
	if m == nil {
		return nil, fmt.Errorf("%w: snapshot of group %d", errNilMessage, env.Group)
	}
	size := proto.Size(m)
	dst, start := beginFrame(nil, kindBatch)
	dst, err := appendEnvelope(dst, env.Group, m, size)
	if err != nil {
		return nil, err
	}
	if len(dst)-start-frameHeader > max {
		return nil, fmt.Errorf("%w: snapshot message of group %d is %d bytes, limit %d", ErrMessageTooLarge, env.Group, len(dst)-start-frameHeader, max)
	}
	finishFrame(dst, start)
	return dst, nil
}

// sendSnapshot runs one snapshot stream on the calling goroutine. A second
// goroutine waits for the receiver's ack from the start, so that a receiver
// that fails early stops the body at once and its verdict is what done gets.
func (p *peer) sendSnapshot(head []byte, body io.Reader) error {
	conn, err := p.t.dialStream(p.ctx, p, streamSnapshot)
	if err != nil {
		return p.snapshotErr(fmt.Errorf("snapshot to node %d: %w", p.id, err))
	}
	defer conn.Close()
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	defer stop()
	ack := &ackWait{done: make(chan struct{})}
	go ack.read(conn)
	sent, err := p.streamSnapshot(conn, head, body, ack)
	if err = p.verdict(conn, err, ack); err != nil {
		return p.snapshotErr(fmt.Errorf("snapshot to node %d after %d body bytes: %w", p.id, sent, err))
	}
	p.log.Info("snapshot delivered", "body_bytes", sent)
	return nil
}

// snapshotErr turns an error caused by our own shutdown into ErrClosed.
func (p *peer) snapshotErr(err error) error {
	if p.ctx.Err() != nil && !errors.Is(err, ErrSnapshotFailed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	p.log.Warn("snapshot stream failed", "err", err)
	return err
}

// ackWait is the receiver's verdict, read on its own goroutine.
type ackWait struct {
	done chan struct{}
	err  error
}

func (a *ackWait) read(conn net.Conn) {
	defer close(a.done)
	fr := newFrameReader(conn, 256, maxAckMsg+16)
	kind, body, err := fr.next()
	if err != nil {
		a.err = fmt.Errorf("read ack: %w", noEOF(err))
		return
	}
	a.err = decodeAck(kind, body)
}

var (
	// errAckedEarly stops a body the receiver has already judged.
	errAckedEarly = errors.New("peer: receiver answered before the body ended")
	// errBodyRead marks a failure of the local body, not of the stream.
	errBodyRead = errors.New("read snapshot body")
)

// verdict waits for the ack, bounded, and picks the outcome: the receiver's
// own failure explains a broken stream better than the write error does.
func (p *peer) verdict(conn net.Conn, streamErr error, ack *ackWait) error {
	if errors.Is(streamErr, errBodyRead) {
		conn.Close() // the receiver sees a truncated body; the ack reader ends
		<-ack.done
		return streamErr
	}
	wait := p.t.cfg.SnapshotAckTimeout
	if streamErr != nil && streamErr != errAckedEarly {
		wait = min(wait, p.t.cfg.HandshakeTimeout) // a grace period for an ack already under way
	}
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		conn.Close() // ends the ack reader
	}
	<-ack.done
	switch {
	case errors.Is(ack.err, ErrSnapshotFailed):
		return ack.err
	case streamErr == errAckedEarly && ack.err == nil:
		return fmt.Errorf("%w: %w", ErrCorruptFrame, errAckedEarly)
	case streamErr != nil && streamErr != errAckedEarly:
		return streamErr
	}
	return ack.err
}

// streamSnapshot writes the head frame, the body in chunks, and the end
// frame, and returns the body bytes sent. It stops early once the receiver
// has answered.
func (p *peer) streamSnapshot(conn net.Conn, head []byte, body io.Reader, ack *ackWait) (int64, error) {
	if err := p.writeWithin(conn, head); err != nil {
		return 0, err
	}
	var sent int64
	buf := make([]byte, frameHeader+1+p.t.cfg.SnapshotChunkBytes)
	for body != nil {
		select {
		case <-ack.done:
			return sent, errAckedEarly
		default:
		}
		n, rerr := io.ReadFull(body, buf[frameHeader+1:])
		if n > 0 {
			if err := p.writeWithin(conn, chunkFrame(buf, n)); err != nil {
				return sent, err
			}
			sent += int64(n)
			p.t.stats.snapshotBytesSent.Add(uint64(n))
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			// Closing without an end frame tells the receiver the body is
			// incomplete.
			return sent, fmt.Errorf("%w: %w", errBodyRead, rerr)
		}
	}
	return sent, p.writeWithin(conn, appendFrame(nil, kindEnd, nil))
}

// chunkFrame fills in the header of a kindChunk frame whose n body bytes are
// already in place after it.
func chunkFrame(buf []byte, n int) []byte {
	frame := buf[:frameHeader+1+n]
	frame[frameHeader] = kindChunk
	payload := frame[frameHeader:]
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	binary.BigEndian.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
	return frame
}

func (p *peer) writeWithin(conn net.Conn, b []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout)); err != nil {
		return fmt.Errorf("set write deadline: %w", err)
	}
	if _, err := conn.Write(b); err != nil {
		return fmt.Errorf("write %d bytes: %w", len(b), err)
	}
	return nil
}

func decodeAck(kind byte, body []byte) error {
	if kind != kindAck || len(body) == 0 {
		return fmt.Errorf("%w: frame kind %d (%d bytes) where an ack belongs", ErrCorruptFrame, kind, len(body))
	}
	switch body[0] {
	case ackOK:
		return nil
	case ackFailed:
		return fmt.Errorf("%w: %s", ErrSnapshotFailed, body[1:])
	default:
		return fmt.Errorf("%w: ack status %d", ErrCorruptFrame, body[0])
	}
}

func appendAck(dst []byte, err error) []byte {
	if err == nil {
		return appendFrame(dst, kindAck, []byte{ackOK})
	}
	msg := err.Error()
	msg = msg[:min(len(msg), maxAckMsg)]
	return appendFrame(dst, kindAck, append([]byte{ackFailed}, msg...))
}

// receiveSnapshot serves one inbound snapshot stream: it hands the envelope
// and body to the Receiver and answers with its verdict.
func (p *peer) receiveSnapshot(conn net.Conn) {
	cfg := p.t.cfg
	cr := &chunkReader{fr: newFrameReader(conn, cfg.ReadBufferBytes, cfg.MaxFrameBytes), conn: conn, timeout: cfg.ReadTimeout}
	envs, err := cr.head()
	if err == nil {
		err = p.t.recv.ReceiveSnapshot(p.id, envs[0], cr)
		if err == nil {
			err = cr.drain() // a complete body ends with the end frame
		}
	}
	if err := p.writeWithin(conn, appendAck(nil, err)); err != nil {
		p.log.Warn("cannot answer snapshot stream", "err", err)
	}
	if err != nil {
		// Read on until the sender, told by the ack, hangs up: closing with
		// unread data would reset the connection and could lose the ack.
		cr.drain()
	}
	p.t.stats.snapshotBytesReceived.Add(uint64(cr.n))
	if err != nil {
		p.t.stats.snapshotsRejected.Add(1)
		p.log.Warn("inbound snapshot failed", "body_bytes", cr.n, "err", err)
		return
	}
	p.t.stats.snapshotsReceived.Add(1)
	p.log.Info("snapshot received", "body_bytes", cr.n)
}

// chunkReader presents the chunks of a snapshot stream as an io.Reader.
type chunkReader struct {
	fr      *frameReader
	conn    net.Conn // for read deadlines; nil in fuzz tests
	timeout time.Duration
	cur     []byte // unread part of the current chunk; aliases fr's buffer
	err     error  // sticky: io.EOF after the end frame, or what broke the stream
	n       int64
}

// head reads the envelope frame that opens the stream.
func (c *chunkReader) head() ([]raftgroup.Envelope, error) {
	kind, body, err := c.next()
	if err != nil {
		return nil, err
	}
	if kind != kindBatch {
		return nil, fmt.Errorf("%w: snapshot stream opens with frame kind %d", ErrCorruptFrame, kind)
	}
	envs, err := decodeBatch(body)
	if err != nil {
		return nil, err
	}
	if len(envs) != 1 {
		return nil, fmt.Errorf("%w: snapshot stream opens with %d envelopes", ErrCorruptFrame, len(envs))
	}
	return envs, nil
}

func (c *chunkReader) next() (byte, []byte, error) {
	if c.conn != nil {
		if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, nil, fmt.Errorf("set read deadline: %w", err)
		}
	}
	kind, body, err := c.fr.next()
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot stream: %w", noEOF(err))
	}
	return kind, body, nil
}

// Read implements io.Reader over the chunks, returning io.EOF only after
// the sender's end frame.
func (c *chunkReader) Read(b []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.fill()
	}
	n := copy(b, c.cur)
	c.cur = c.cur[n:]
	c.n += int64(n)
	return n, nil
}

func (c *chunkReader) fill() {
	kind, body, err := c.next()
	switch {
	case err != nil:
		c.err = err
	case kind == kindChunk:
		c.cur = body
	case kind == kindEnd:
		c.err = io.EOF
	default:
		c.err = fmt.Errorf("%w: frame kind %d inside a snapshot body", ErrCorruptFrame, kind)
	}
}

// drain reads what the Receiver left unread, so that a complete body is
// told from a truncated one.
func (c *chunkReader) drain() error {
	if _, err := io.Copy(io.Discard, c); err != nil {
		return fmt.Errorf("drain snapshot body: %w", err)
	}
	return nil
}
