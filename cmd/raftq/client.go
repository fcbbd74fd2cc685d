package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
)

// clientFlags are the connection flags every client subcommand shares.
type clientFlags struct {
	brokers string
	// dial, when set, makes every connection to the brokers: a cluster in
	// a network namespace is reached through its DialContext (the matrix's
	// cost phase).
	dial dialFunc
	sasl saslFlags // client_sasl.go
	tls  tlsFlags  // client_tls.go
}

func bindClientFlags(e *env, fs *pflag.FlagSet) *clientFlags {
	c := &clientFlags{}
	fs.StringVarP(&c.brokers, "brokers", "b", e.flagDefault(envBrokers, "127.0.0.1:9092"), "bootstrap brokers, comma separated; $"+envBrokers+" sets the default")
	c.sasl.bind(e, fs)
	c.tls.bind(e, fs)
	return c
}

func (c *clientFlags) seeds() []string {
	var out []string
	for _, s := range strings.Split(c.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// client returns a kgo client for the brokers with extra options.
func (c *clientFlags) client(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(c.seeds()...)}
	m, err := c.sasl.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		base = append(base, kgo.SASL(m))
	}
	tc, err := c.tls.config()
	if err != nil {
		return nil, err
	}
	switch {
	case tc != nil && c.dial != nil:
		return nil, usageError{fmt.Errorf("--tls cannot reach a cluster in a network namespace")}
	case tc != nil:
		base = append(base, kgo.DialTLSConfig(tc))
	case c.dial != nil:
		base = append(base, kgo.Dialer(c.dial))
	}
	return kgo.NewClient(append(base, opts...)...)
}

// connect is client once some seed has answered as a Kafka broker. kgo
// retries a seed that refuses or never answers for as long as a request
// may take, so a command at a wrong address would wait out its timeouts
// and then report a symptom; connect reports the cause within a second or
// so instead.
func (c *clientFlags) connect(ctx context.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := c.client(opts...)
	if err != nil {
		return nil, err
	}
	if err := reach(ctx, cl, c.seeds(), c.dial); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

func (c *clientFlags) admin(ctx context.Context) (*kadm.Client, func(), error) {
	cl, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

const (
	// firstAnswerWait bounds the wait for a seed's first answer: a broker
	// answers ApiVersions in milliseconds, while a port that accepts and
	// never answers (an admin port reading a Kafka frame as HTTP) would
	// hold a command for kgo's 40 s of retries.
	firstAnswerWait = 5 * time.Second
	// identifyAfter is how long the first answer may take before the
	// seeds are asked what they are.
	identifyAfter = 200 * time.Millisecond
	// identifyWait bounds that question.
	identifyWait = time.Second
)

// reach waits until a seed answers cl's first request, and says why none
// does: the dial error, or that a seed is a raftq admin or peer port
// (asked through dial, or net.Dialer when nil).
func reach(ctx context.Context, cl *kgo.Client, seeds []string, dial dialFunc) error {
	pctx, cancel := context.WithTimeout(ctx, firstAnswerWait)
	defer cancel()
	pinged := make(chan error, 1)
	go func() { pinged <- cl.Ping(pctx) }()
	var err error
	answered := false
	select {
	case err = <-pinged:
		if err == nil {
			return nil
		}
		answered = true
	case <-time.After(identifyAfter):
	}
	if wrong := identifySeeds(ctx, seeds, dial); wrong != nil {
		return wrong
	}
	if !answered {
		err = <-pinged
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case pctx.Err() != nil:
		return fmt.Errorf("no Kafka broker answered at %s within %s", strings.Join(seeds, ","), firstAnswerWait)
	}
	return fmt.Errorf("no Kafka broker reachable at %s: %w", strings.Join(seeds, ","), err)
}

// identifySeeds asks each seed at once what it is, and returns the first
// wrongPortError.
func identifySeeds(ctx context.Context, seeds []string, dial dialFunc) error {
	ctx, cancel := context.WithTimeout(ctx, identifyWait)
	defer cancel()
	found := make(chan error, len(seeds))
	for _, s := range seeds {
		go func() { found <- identify(ctx, dial, s) }()
	}
	for range seeds {
		if err := <-found; err != nil {
			return err
		}
	}
	return nil
}

// dialFunc connects to addr, as net.Dialer.DialContext does.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// wrongPortError is a seed that is a raftq node's admin or peer port.
type wrongPortError struct {
	addr, kind string // kind is admin or peer
	node       uint64 // 0: unknown
	kafka      string // the node's Kafka address, when known
	hint       string // else, where to find it
}

func (e *wrongPortError) Error() string {
	s := fmt.Sprintf("%s is a raftq %s port", e.addr, e.kind)
	if e.node != 0 {
		s += fmt.Sprintf(" (node %d)", e.node)
	}
	s += ", not a Kafka one; the Kafka port is "
	if e.kafka != "" {
		return s + e.kafka
	}
	return s + e.hint
}

// identify sends addr an HTTP request for the node status, which an admin
// port answers and a peer port, reading it as a handshake, refuses with
// its own reply. It returns nil for anything else (a Kafka broker hangs
// up) and when addr does not answer in time. It connects through dial,
// or net.Dialer when nil.
func identify(ctx context.Context, dial dialFunc, addr string) error {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "GET /v1/status HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return nil
	}
	r := bufio.NewReader(conn)
	head, err := r.Peek(4)
	if err != nil {
		return nil
	}
	switch string(head) {
	case peerMagic:
		return peerPort(addr, r)
	case "HTTP":
		return adminPort(addr, r)
	}
	return nil
}

// peerMagic opens a raftq peer handshake reply (transport/peer).
const peerMagic = "RQPR"

// peerPort reads the node id from a peer handshake reply (magic, version
// uint16, code byte, node uint64).
func peerPort(addr string, r *bufio.Reader) error {
	e := &wrongPortError{addr: addr, kind: "peer", hint: "the node's --kafka-addr, shown by `raftq cluster status`"}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if p, err := strconv.Atoi(port); err == nil && p > 100 {
			e.hint += fmt.Sprintf("; raftq dev puts peers 100 above Kafka: try -b %s", net.JoinHostPort(host, strconv.Itoa(p-100)))
		}
	}
	if b, err := r.Peek(15); err == nil {
		e.node = binary.BigEndian.Uint64(b[7:15])
	}
	return e
}

// adminPort reads the status an admin port answered with, which names the
// node's Kafka address.
func adminPort(addr string, r *bufio.Reader) error {
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var s broker.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil || s.KafkaAddr == "" {
		return fmt.Errorf("%s answers HTTP (%s), not Kafka", addr, resp.Status)
	}
	return &wrongPortError{addr: addr, kind: "admin", node: s.NodeID, kafka: s.KafkaAddr}
}
