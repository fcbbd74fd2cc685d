package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"time"
)

// frameBuffered reports whether the whole next frame is in br, so reading
// it does no I/O and needs no deadline.
func frameBuffered(br *bufio.Reader) bool {
	if br.Buffered() < 4 {
		return false
	}
	prefix, _ := br.Peek(4)
	size := int64(int32(binary.BigEndian.Uint32(prefix)))
	return size < 0 || int64(br.Buffered()) >= 4+size
}

// armRead sets the read deadline d from now (none for zero) unless the
// connection is draining, which it reports as false.
func (c *Conn) armRead(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining.Load() {
		return false
	}
	if next := deadline(d); !closeEnough(c.readDeadline, next, d) {
		c.nc.SetReadDeadline(next)
		c.readDeadline = next
	}
	return true
}

// deadline is d from now, or none for zero.
func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// closeEnough reports whether the deadline in force, cur, may stand for
// next: both none, or cur at most d/16 earlier. Resetting a socket
// deadline costs a timer update, so deadlines are coarse: a timeout may
// fire up to 1/16 of its duration early.
func closeEnough(cur, next time.Time, d time.Duration) bool {
	if cur.IsZero() || next.IsZero() {
		return cur.IsZero() && next.IsZero()
	}
	diff := next.Sub(cur)
	return diff >= 0 && diff < d/16
}

// drain stops reading: the reader exits at once and the writer finishes
// the responses already queued.
func (c *Conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining.Store(true)
	c.readDeadline = time.Unix(1, 0)
	c.nc.SetReadDeadline(c.readDeadline)
}

func (c *Conn) isDraining() bool { return c.draining.Load() }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
