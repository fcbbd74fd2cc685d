package floor

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// cluster is the nodes of one run and the links between them.
type cluster struct {
	nodes     []*node
	listeners []net.Listener
	conns     []net.Conn
	links     [][]*link // links[leader][follower]; nil on the diagonal
	quorum    int32
	nextID    uint64 // owned by the generating goroutine
	// outstanding counts replica copies sent and not yet durable.
	outstanding atomic.Int64

	stop     chan struct{} // closed by fail or shutdown
	stopOnce sync.Once
	mu       sync.Mutex // guards err; a leaf lock
	err      error
	done     sync.WaitGroup // every goroutine of the run
}

// batch is one partition's append for one tick.
type batch struct {
	id      uint64
	due     time.Time // when it should have gone; latency runs from here
	acks    atomic.Int32
	quorum  int32
	slot    *atomic.Int64
	settled func() // runs on every replica's acknowledgement
}

// ack counts one replica's durable copy; the one that makes the quorum
// records the latency.
func (b *batch) ack() {
	if b.acks.Add(1) == b.quorum {
		b.slot.Store(max(int64(time.Since(b.due)), 1))
	}
	b.settled()
}

// start opens every node and connects every leader to every follower.
func start(cfg Config) (*cluster, error) {
	c := &cluster{quorum: int32(cfg.Nodes/2 + 1), stop: make(chan struct{}), links: make([][]*link, cfg.Nodes)}
	for i := range cfg.Nodes {
		n, err := openNode(cfg.Dir, i, cfg.Prealloc)
		if err != nil {
			return nil, errors.Join(err, c.shutdown())
		}
		c.nodes = append(c.nodes, n)
		c.links[i] = make([]*link, cfg.Nodes)
		c.goRun(func() { n.run(c.stop, c.fail) })
	}
	for f := range cfg.Nodes {
		if err := c.listen(f); err != nil {
			return nil, errors.Join(err, c.shutdown())
		}
	}
	return c, nil
}

// listen makes node f a follower of every other node over loopback TCP.
func (c *cluster) listen(f int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	c.listeners = append(c.listeners, ln)
	for l := range c.nodes {
		if l == f {
			continue
		}
		out, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return fmt.Errorf("dial node %d: %w", f, err)
		}
		in, err := ln.Accept()
		if err != nil {
			out.Close()
			return fmt.Errorf("accept on node %d: %w", f, err)
		}
		c.conns = append(c.conns, out, in)
		lk := newLink(out)
		c.links[l][f] = lk
		c.goRun(func() { lk.writeLoop(c.stop, c.fail) })
		c.goRun(func() { lk.ackLoop(c.fail) })
		c.goRun(func() { follow(in, c.nodes[f], c.stop, c.fail) })
	}
	return nil
}

func (c *cluster) goRun(fn func()) {
	c.done.Add(1)
	go func() { defer c.done.Done(); fn() }()
}

// send appends data on leader l and sends it to every other node at once.
// The batch's latency runs from due, when it should have gone.
func (c *cluster) send(l int, due time.Time, data []byte, slot *atomic.Int64) {
	c.nextID++
	c.outstanding.Add(int64(len(c.nodes)))
	b := &batch{id: c.nextID, due: due, quorum: c.quorum, slot: slot, settled: c.settle}
	for f, lk := range c.links[l] {
		if f != l {
			lk.send(b, data, c.stop)
		}
	}
	c.nodes[l].append(data, b.ack)
}

func (c *cluster) settle() { c.outstanding.Add(-1) }

// fail records the run's first error and stops it; errors that follow
// from stopping are not recorded.
func (c *cluster) fail(err error) {
	select {
	case <-c.stop:
		return
	default:
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.halt()
}

func (c *cluster) halt() { c.stopOnce.Do(func() { close(c.stop) }) }

// shutdown stops every goroutine, closes everything, and returns the
// run's first error.
func (c *cluster) shutdown() error {
	c.halt()
	for _, ln := range c.listeners {
		ln.Close()
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.done.Wait()
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.close())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(append([]error{c.err}, errs...)...)
}
