package floor

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// frameHeader is a batch id and the batch's length; an acknowledgement
// is the id alone.
const frameHeader = 12

// maxFrame bounds what a follower accepts, so that a stray connection
// cannot make it allocate without limit.
const maxFrame = 64 << 20

// link carries a leader's batches to one follower and brings back the
// follower's acknowledgements.
type link struct {
	conn    net.Conn
	out     chan outgoing
	mu      sync.Mutex // guards pending; a leaf lock
	pending map[uint64]*batch
}

// outgoing is a batch queued for the follower; data is shared with the
// leader's own write and the other links, and only read.
type outgoing struct {
	id   uint64
	data []byte
}

func newLink(conn net.Conn) *link {
	return &link{conn: conn, out: make(chan outgoing, 4096), pending: map[uint64]*batch{}}
}

// send queues b's data for the follower, or gives up once stop closes.
func (l *link) send(b *batch, data []byte, stop <-chan struct{}) {
	l.mu.Lock()
	l.pending[b.id] = b
	l.mu.Unlock()
	select {
	case l.out <- outgoing{b.id, data}:
	case <-stop:
	}
}

// writeLoop writes queued batches, everything queued in one flush.
func (l *link) writeLoop(stop <-chan struct{}, fail func(error)) {
	w := bufio.NewWriterSize(l.conn, 1<<16)
	var h [frameHeader]byte
	write := func(o outgoing) {
		binary.LittleEndian.PutUint64(h[:], o.id)
		binary.LittleEndian.PutUint32(h[8:], uint32(len(o.data)))
		w.Write(h[:])
		w.Write(o.data)
	}
	for {
		select {
		case <-stop:
			return
		case o := <-l.out:
			write(o)
		}
		for len(l.out) > 0 {
			write(<-l.out)
		}
		if err := w.Flush(); err != nil {
			fail(fmt.Errorf("send to follower: %w", err))
			return
		}
	}
}

// ackLoop counts the follower's acknowledgements toward their batches.
func (l *link) ackLoop(fail func(error)) {
	r := bufio.NewReader(l.conn)
	var id [8]byte
	for {
		if _, err := io.ReadFull(r, id[:]); err != nil {
			fail(fmt.Errorf("read acknowledgement: %w", err))
			return
		}
		n := binary.LittleEndian.Uint64(id[:])
		l.mu.Lock()
		b := l.pending[n]
		delete(l.pending, n)
		l.mu.Unlock()
		if b == nil {
			fail(fmt.Errorf("acknowledgement for unknown batch %d", n))
			return
		}
		b.ack()
	}
}

// follow serves one leader's connection on node n: it appends every batch
// and acknowledges it once durable.
func follow(conn net.Conn, n *node, stop <-chan struct{}, fail func(error)) {
	acks := make(chan uint64, 4096)
	var writer sync.WaitGroup
	writer.Go(func() { writeAcks(conn, acks, stop, fail) })
	defer writer.Wait() // it ends with stop, which every return here brings
	readBatches(conn, n, acks, stop, fail)
}

// readBatches reads batches until the connection fails or carries a bad one;
// either way it reports the error, which stops the run.
func readBatches(conn io.Reader, n *node, acks chan<- uint64, stop <-chan struct{}, fail func(error)) {
	r := bufio.NewReaderSize(conn, 1<<16)
	var h [frameHeader]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			fail(fmt.Errorf("read batch: %w", err))
			return
		}
		id, size := binary.LittleEndian.Uint64(h[:]), binary.LittleEndian.Uint32(h[8:])
		if size > maxFrame {
			fail(fmt.Errorf("batch %d of %d bytes is over %d", id, size, maxFrame))
			return
		}
		// Grown as the bytes arrive, so a length that lies costs nothing.
		data, err := io.ReadAll(io.LimitReader(r, int64(size)))
		if err == nil && len(data) < int(size) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			fail(fmt.Errorf("read batch %d: %w", id, err))
			return
		}
		n.append(data, func() {
			select {
			case acks <- id:
			case <-stop:
			}
		})
	}
}

// writeAcks sends acknowledgements, everything queued in one flush.
func writeAcks(conn net.Conn, acks <-chan uint64, stop <-chan struct{}, fail func(error)) {
	w := bufio.NewWriter(conn)
	var b [8]byte
	for {
		var id uint64
		select {
		case <-stop:
			return
		case id = <-acks:
		}
		binary.LittleEndian.PutUint64(b[:], id)
		w.Write(b[:])
		for len(acks) > 0 {
			binary.LittleEndian.PutUint64(b[:], <-acks)
			w.Write(b[:])
		}
		if err := w.Flush(); err != nil {
			fail(fmt.Errorf("send acknowledgement: %w", err))
			return
		}
	}
}
