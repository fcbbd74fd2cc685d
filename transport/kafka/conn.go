package kafka

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// readBufferBytes sizes each connection's read buffer: many small
// pipelined requests are read with one syscall; big frames bypass it.
const readBufferBytes = 64 << 10

// Conn is one client connection as the handler sees it. Its methods are
// safe for concurrent use; it stays valid after the connection closes.
type Conn struct {
	id     uint64
	srv    *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	log    *slog.Logger

	clientID atomic.Pointer[string]
	software atomic.Pointer[ClientSoftware]
	sasl     saslState // SASLConfig listeners only; see sasl.go
	tls      tlsState  // TLS listeners only; see tls.go

	// slots holds one token per request read and not yet written; the
	// reader blocks on it at Config.MaxInFlight. queue carries requests
	// to the writer in arrival order and never blocks, since slots bound
	// it.
	slots chan struct{}
	queue chan item

	// mu pairs the draining flag with read-deadline changes, so a drain
	// is never undone by a reader re-arming its deadline.
	mu           sync.Mutex
	draining     atomic.Bool // written under mu
	readDeadline time.Time   // under mu
	// writeDeadline is the writer goroutine's.
	writeDeadline time.Time
}

// ClientSoftware is what a client says it is in ApiVersions v3+.
type ClientSoftware struct {
	Name, Version string
}

// Listener is the name of the listener the connection came in on
// (Config.Name).
func (c *Conn) Listener() string { return c.srv.cfg.Name }

// ID is unique among the server's connections.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is the address the client connected to.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Context is cancelled when the connection closes or the server closes;
// context.Cause tells why. Pending work of this connection should end then.
func (c *Conn) Context() context.Context { return c.ctx }

// ClientID is the client id of the latest request ("" for a null one).
func (c *Conn) ClientID() string {
	if p := c.clientID.Load(); p != nil {
		return *p
	}
	return ""
}

// ClientSoftware is what the client sent in its latest ApiVersions v3+
// request, or zero.
func (c *Conn) ClientSoftware() ClientSoftware {
	if p := c.software.Load(); p != nil {
		return *p
	}
	return ClientSoftware{}
}

func (s *Server) newConn(nc net.Conn, id uint64) *Conn {
	ctx, cancel := context.WithCancelCause(s.ctx)
	return &Conn{
		id: id, srv: s, nc: s.wrapTLS(nc), ctx: ctx, cancel: cancel,
		log:   s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		slots: make(chan struct{}, s.cfg.MaxInFlight),
		queue: make(chan item, s.cfg.MaxInFlight),
	}
}

// serve runs the connection: this goroutine reads, a second one writes.
func (c *Conn) serve() {
	stop := context.AfterFunc(c.ctx, func() { c.nc.Close() })
	defer stop()
	c.srv.obs.ConnOpened(c)
	if err := c.tlsHandshake(); err != nil {
		c.cancel(err)
		c.nc.Close()
		c.closed(context.Cause(c.ctx))
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		err := c.writeLoop()
		if err == nil {
			err = errDrained
		}
		c.cancel(err)
	})
	if err := c.readLoop(); errors.Is(err, errDrained) {
		close(c.queue) // the writer finishes what is queued, then exits
	} else {
		c.cancel(err)
	}
	wg.Wait()
	c.nc.Close()
	c.failQueued()
	c.closed(context.Cause(c.ctx))
}

func (c *Conn) closed(cause error) {
	var reason error
	if !errors.Is(cause, errDrained) {
		reason = cause
	}
	switch {
	case reason == nil:
		c.log.Debug("connection closed")
	case errors.Is(reason, ErrTLSHandshake):
		c.log.Info("connection closed", "reason", reason) // as Kafka, which logs failed authentications
	case errors.Is(reason, ErrServerClosed), errors.Is(reason, ErrIdle), isSocketError(reason):
		c.log.Debug("connection closed", "reason", reason)
	default:
		c.log.Warn("connection closed on error", "reason", reason)
	}
	c.srv.obs.ConnClosed(c, reason)
}

// isSocketError tells errors of the peer's socket apart from protocol
// errors worth a warning.
func isSocketError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)
}

// failQueued reports requests that never got their response written.
func (c *Conn) failQueued() {
	for {
		select {
		case it, ok := <-c.queue:
			if !ok {
				return
			}
			c.srv.obs.RequestDone(c, it.key, it.version, OutcomeFailed, time.Since(it.received))
		default:
			return
		}
	}
}

// readLoop reads frames and dispatches them until the connection ends. It
// returns errDrained when it stopped cleanly at a frame boundary.
func (c *Conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, readBufferBytes)
	for {
		if err := c.awaitFrame(br); err != nil {
			return err
		}
		if err := c.acquire(); err != nil {
			return err
		}
		it, err := c.readRequest(br)
		if err != nil {
			return err
		}
		select { // never waits while slots bound the queue
		case c.queue <- it:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
}

// awaitFrame waits for the first byte of the next frame, applying the idle
// timeout only while nothing is in flight.
func (c *Conn) awaitFrame(br *bufio.Reader) error {
	if c.draining.Load() {
		return errDrained
	}
	if br.Buffered() > 0 {
		return nil // pipelined: the next frame is already here
	}
	for {
		if !c.armRead(c.srv.cfg.IdleTimeout) {
			return errDrained
		}
		_, err := br.Peek(1)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, io.EOF):
			return errDrained // the peer closed (or half-closed) between frames
		case !isTimeout(err):
			return err
		case c.isDraining():
			return errDrained
		case len(c.slots) > 0:
			if h := c.srv.testHooks.idleWhileBusy; h != nil {
				h(c)
			}
			continue // waiting on responses is not idleness
		default:
			return ErrIdle
		}
	}
}

func (c *Conn) readRequest(br *bufio.Reader) (item, error) {
	if !frameBuffered(br) && !c.armRead(c.srv.cfg.ReadTimeout) {
		return item{}, errDrained
	}
	frame, err := readFrame(br, c.srv.cfg.MaxFrameBytes)
	if err != nil {
		if isTimeout(err) && c.isDraining() {
			return item{}, errDrained
		}
		return item{}, err
	}
	return c.dispatch(frame, time.Now())
}

// acquire takes an in-flight slot, waiting while MaxInFlight are taken.
func (c *Conn) acquire() error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	if h := c.srv.testHooks.readerBlocked; h != nil {
		h(c)
	}
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}

func (c *Conn) release() { <-c.slots }
