package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echo answers "from <id>: <req>".
func echo(from uint64, req []byte, _ time.Time) []byte {
	return append([]byte(fmt.Sprintf("from %d: ", from)), req...)
}

func withHandler(h func(uint64, []byte, time.Time) []byte) func(*Config) {
	return func(c *Config) { c.FetchHandler = h }
}

// fetchPair starts leader node 2 serving h and follower node 1.
func fetchPair(t *testing.T, h func(uint64, []byte, time.Time) []byte) (follower, leader *node) {
	t.Helper()
	leader = startNode(t, 2, withHandler(h))
	follower = startNode(t, 1, nil)
	connect(follower, leader)
	return follower, leader
}

func fetchOK(t testing.TB, n *node, to uint64, req []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.Fetch(ctx, to, req)
	if err != nil {
		t.Fatalf("fetch from node %d: %v", to, err)
	}
	return resp
}

func TestFetch_RoundTrip(t *testing.T) {
	f, l := fetchPair(t, echo)
	for _, req := range [][]byte{nil, []byte("offset=42"), bytes.Repeat([]byte{7}, 1<<20)} {
		resp := fetchOK(t, f, 2, req)
		if got, want := resp, append([]byte("from 1: "), req...); !bytes.Equal(got, want) {
			t.Fatalf("response of %d bytes, want %d bytes %.20q", len(got), len(want), want)
		}
	}
	fs, ls := f.Stats(), l.Stats()
	if fs.FetchRequests != 3 || ls.FetchesServed != 3 || fs.FetchErrors != 0 || ls.FetchServeErrors != 0 {
		t.Errorf("stats: follower %d requests %d errors, leader %d served %d errors; want 3 0 3 0",
			fs.FetchRequests, fs.FetchErrors, ls.FetchesServed, ls.FetchServeErrors)
	}
	if min(fs.FetchBytesSent, fs.FetchBytesReceived, ls.FetchServedBytesIn, ls.FetchServedBytesOut) < 1<<20 {
		t.Errorf("byte counters miss the 1 MiB exchange: %+v", fs)
	}
	if fs.FetchBytesSent != ls.FetchServedBytesIn || fs.FetchBytesReceived != ls.FetchServedBytesOut {
		t.Errorf("the two sides count different bytes: sent %d/%d, received %d/%d",
			fs.FetchBytesSent, ls.FetchServedBytesIn, fs.FetchBytesReceived, ls.FetchServedBytesOut)
	}
}

func TestFetch_ReusesOneConnection(t *testing.T) {
	f, l := fetchPair(t, echo)
	for i := range 200 {
		req := []byte(fmt.Sprint(i))
		if got, want := string(fetchOK(t, f, 2, req)), "from 1: "+string(req); got != want {
			t.Fatalf("request %d: got %q, want %q", i, got, want)
		}
	}
	if got := f.Stats().FetchDials; got != 1 {
		t.Errorf("FetchDials = %d after 200 sequential fetches, want 1", got)
	}
	if got := l.Stats().FetchesServed; got != 200 {
		t.Errorf("FetchesServed = %d, want 200", got)
	}
}

// TestFetch_ConcurrentCallersTakeTurns: one request is outstanding per
// stream, so the handler never runs twice at once for one fetcher.
func TestFetch_ConcurrentCallersTakeTurns(t *testing.T) {
	var running, overlap atomic.Int32
	f, _ := fetchPair(t, func(from uint64, req []byte, d time.Time) []byte {
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		return echo(from, req, d)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8*25)
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				req := fmt.Sprintf("%d/%d", g, i)
				resp, err := f.Fetch(context.Background(), 2, []byte(req))
				if err == nil && string(resp) != "from 1: "+req {
					err = fmt.Errorf("request %s answered %q", req, resp)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("the handler ran concurrently for one fetcher %d times", n)
	}
	if got := f.Stats().FetchDials; got != 1 {
		t.Errorf("FetchDials = %d, want 1", got)
	}
}

func TestFetch_LongPollHonoursDeadline(t *testing.T) {
	deadlines := make(chan time.Time, 2)
	f, _ := fetchPair(t, func(_ uint64, req []byte, deadline time.Time) []byte {
		deadlines <- deadline
		if string(req) == "peek" {
			return []byte("now")
		}
		<-time.After(time.Until(deadline)) // a long poll that finds nothing
		return []byte("nothing new")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	sent := time.Now()
	resp, err := f.Fetch(ctx, 2, []byte("wait"))
	if err != nil {
		t.Fatalf("long poll: %v (the answer must arrive before the caller's deadline)", err)
	}
	if string(resp) != "nothing new" {
		t.Errorf("got %q", resp)
	}
	dl, _ := ctx.Deadline()
	if got := <-deadlines; !got.After(sent) || !got.Before(dl) {
		t.Errorf("handler deadline %v, want within (%v, %v)", got, sent, dl)
	}

	// Without a deadline, the wait is bounded by ReadTimeout.
	sent = time.Now()
	if _, err := f.Fetch(context.Background(), 2, []byte("peek")); err != nil {
		t.Fatal(err)
	}
	if got, limit := <-deadlines, sent.Add(f.cfg.ReadTimeout); !got.After(sent) || got.After(limit) {
		t.Errorf("handler deadline %v without a caller deadline, want within (%v, %v]", got, sent, limit)
	}
}

// blocker is a handler that holds each call until released.
type blocker struct {
	entered  chan struct{}
	release  chan struct{}
	returned atomic.Int32
	running  atomic.Int32
	overlaps atomic.Int32 // calls that began while another ran
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocker) handle(from uint64, req []byte, d time.Time) []byte {
	if b.running.Add(1) > 1 {
		b.overlaps.Add(1)
	}
	defer b.running.Add(-1)
	b.entered <- struct{}{}
	<-b.release
	b.returned.Add(1)
	return echo(from, req, d)
}

// fetchAsync runs a Fetch and delivers its error.
func fetchAsync(n *node, ctx context.Context, to uint64, req string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := n.Fetch(ctx, to, []byte(req))
		ch <- err
	}()
	return ch
}

func TestFetch_ContextCancelMidRequest(t *testing.T) {
	b := newBlocker()
	f, _ := fetchPair(t, b.handle)
	ctx, cancel := context.WithCancel(context.Background())
	done := fetchAsync(f, ctx, 2, "slow")
	<-b.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled fetch: %v, want context.Canceled", err)
	}
	// The next request, on a new stream, waits for the cancelled one's
	// handler: calls for one fetcher never overlap.
	type result struct {
		resp []byte
		err  error
	}
	next := make(chan result, 1)
	go func() {
		resp, err := f.Fetch(context.Background(), 2, []byte("next"))
		next <- result{resp, err}
	}()
	eventually(t, "the next request is sent", func() bool { return f.Stats().FetchRequests == 2 })
	close(b.release)
	if r := <-next; r.err != nil || string(r.resp) != "from 1: next" {
		t.Errorf("next fetch got %q, %v: want its own answer", r.resp, r.err)
	}
	if n := b.overlaps.Load(); n != 0 {
		t.Errorf("%d handler calls overlapped for one fetcher", n)
	}
	if got := f.Stats().FetchDials; got != 2 {
		t.Errorf("FetchDials = %d, want 2: a cancelled request leaves its stream out of step", got)
	}
}

// sized answers with as many bytes as the request's first 4 bytes say.
func sized(_ uint64, req []byte, _ time.Time) []byte {
	if len(req) < 4 {
		return []byte("small")
	}
	return make([]byte, binary.BigEndian.Uint32(req))
}

func sizeReq(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func TestFetch_OversizedRefusedStreamGoesOn(t *testing.T) {
	l := startNode(t, 2, func(c *Config) { c.FetchHandler = sized; c.MaxFetchBytes = 8 << 10 })
	f := startNode(t, 1, func(c *Config) { c.MaxFetchBytes = 16 << 10 })
	small := startNode(t, 3, func(c *Config) { c.MaxFetchBytes = 4 << 10 })
	connect(f, l, small)
	ctx := context.Background()

	cases := []struct {
		name   string
		from   *node
		req    []byte
		reason string
	}{
		{"request over the fetcher's limit", f, make([]byte, 20<<10), "request of 20480 bytes, limit 16384"},
		{"request over the leader's limit", f, make([]byte, 12<<10), "request of 12288 bytes, limit 8192"},
		{"response over the leader's limit", f, sizeReq(10 << 10), "response of 10240 bytes, limit 8192"},
		{"response over the fetcher's limit", small, sizeReq(6 << 10), "frame too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.from.Fetch(ctx, 2, tc.req)
			if !errors.Is(err, ErrFetchTooLarge) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want %v mentioning %q", err, ErrFetchTooLarge, tc.reason)
			}
			// The stream is still in step: the next request gets its own answer.
			if got := string(fetchOK(t, tc.from, 2, nil)); got != "small" {
				t.Errorf("next fetch got %q", got)
			}
			if got := len(fetchOK(t, tc.from, 2, sizeReq(3<<10))); got != 3<<10 {
				t.Errorf("next fetch got %d bytes, want %d", got, 3<<10)
			}
		})
	}
	if got := f.Stats().FetchDials + small.Stats().FetchDials; got != 2 {
		t.Errorf("%d fetch dials, want 2: an oversized frame must not cost the stream", got)
	}
	if got := l.Stats().FetchServeErrors; got != 2 {
		t.Errorf("FetchServeErrors = %d, want 2", got)
	}
	if !logHas(l.logs, "level=WARN", "refusing fetch request: too large", "peer=1") {
		t.Error("the leader did not log the oversized request")
	}
}

// rawFetchStream handshakes with target as node from for a fetch stream.
func rawFetchStream(t *testing.T, target *node, from uint64) net.Conn {
	t.Helper()
	rp, conn := rawDial(t, target, appendHello(nil, hello{
		version: protoVersion, stream: streamFetch, from: from, to: target.id, cluster: "test-cluster",
	}))
	if err := judgeReply(rp, target.id, "test-cluster", nil); err != nil {
		t.Fatalf("raw handshake: %v", err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return conn
}

func TestFetch_CorruptRequestClosesOnlyThatStream(t *testing.T) {
	l := startNode(t, 2, withHandler(echo))
	n3 := startNode(t, 3, nil)
	connect(l, n3)
	l.AddPeer(1, "127.0.0.1:1") // node 1 is played by a raw connection
	fetchOK(t, n3, 2, []byte("before"))

	conn := rawFetchStream(t, l, 1)
	req := appendFetchFrame(nil, fetchFrame{kind: kindFetchReq, budget: time.Second, body: []byte("hi")})
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(conn, 256, 1<<20)
	kind, body, err := fr.next()
	if err != nil || kind != kindFetchResp || string(body) != "from 1: hi" {
		t.Fatalf("raw fetch: kind %d body %q err %v", kind, body, err)
	}
	bad := bytes.Clone(req)
	bad[len(bad)-1] ^= 0x01
	if _, err := conn.Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fr.next(); err == nil || isTimeout(err) {
		t.Fatalf("after a corrupt request the stream must close; read: %v", err)
	}
	eventually(t, "the leader logs the corrupt stream", func() bool {
		return logHas(l.logs, "level=ERROR", "closing fetch stream: corrupt stream", "peer=1", "crc")
	})
	if got := l.Stats().CorruptFrames; got != 1 {
		t.Errorf("CorruptFrames = %d, want 1", got)
	}
	fetchOK(t, n3, 2, []byte("after"))
	if got := n3.Stats().FetchDials; got != 1 {
		t.Errorf("node 3 dialled %d fetch streams, want 1: its stream was disturbed", got)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fakeFetchLeader accepts fetch streams as node id and answers each
// request with answer's bytes, written raw.
func fakeFetchLeader(t *testing.T, id uint64, answer func(req []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // ends when the fetcher hangs up
				if h, err := readHello(conn); err != nil || h.stream != streamFetch {
					conn.Close()
					return
				}
				conn.Write(appendReply(nil, reply{version: protoVersion, node: id, cluster: "test-cluster"}))
				fr := newFrameReader(conn, 256, 1<<20)
				for {
					_, body, err := fr.next()
					if err != nil {
						conn.Close()
						return
					}
					conn.Write(answer(body[fetchReqFixed:]))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestFetch_CorruptResponseClosesStream(t *testing.T) {
	addr := fakeFetchLeader(t, 2, func(req []byte) []byte {
		frame := appendFetchFrame(nil, fetchFrame{kind: kindFetchResp, body: req})
		if string(req) == "corrupt" {
			frame[frameHeader+2] ^= 0x10
		}
		return frame
	})
	f := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: addr} })
	fetchOK(t, f, 2, []byte("fine"))
	if _, err := f.Fetch(context.Background(), 2, []byte("corrupt")); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("corrupt response: %v, want %v", err, ErrCorruptFrame)
	}
	if !logHas(f.logs, "level=ERROR", "closing fetch stream: corrupt stream", "peer=2") {
		t.Error("the fetcher did not log the corrupt stream")
	}
	if got := string(fetchOK(t, f, 2, []byte("again"))); got != "again" {
		t.Errorf("after redial got %q", got)
	}
	if st := f.Stats(); st.FetchDials != 2 || st.CorruptFrames != 1 {
		t.Errorf("FetchDials %d, CorruptFrames %d; want 2 and 1", st.FetchDials, st.CorruptFrames)
	}
}

func TestFetch_ServerDiesMidRequestClientRedials(t *testing.T) {
	b := newBlocker()
	f, l := fetchPair(t, b.handle)
	addr := l.Addr().String()
	done := fetchAsync(f, context.Background(), 2, "slow")
	<-b.entered
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	err := <-done
	if !errors.Is(err, ErrFetchAborted) {
		t.Fatalf("fetch from a leader that went away: %v, want %v", err, ErrFetchAborted)
	}
	close(b.release)
	<-closed

	startNode(t, 2, func(c *Config) {
		c.ListenAddr = addr
		c.FetchHandler = echo
		c.Peers = map[uint64]string{1: f.Addr().String()}
	})
	if got := string(fetchOK(t, f, 2, []byte("back"))); got != "from 1: back" {
		t.Errorf("after the restart got %q", got)
	}
	if st := f.Stats(); st.FetchDials != 2 || st.FetchErrors != 1 {
		t.Errorf("FetchDials %d, FetchErrors %d; want 2 and 1", st.FetchDials, st.FetchErrors)
	}
}

func TestFetch_RefusesDuplicateID(t *testing.T) {
	f, l := fetchPair(t, echo)
	fetchOK(t, f, 2, []byte("real"))

	imp := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: l.Addr().String()} })
	if _, err := imp.Fetch(context.Background(), 2, []byte("impostor")); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("impostor's fetch: %v, want %v", err, ErrDuplicateID)
	}
	if !logHas(l.logs, "level=ERROR", "refusing peer connection", "already has a live fetch stream") {
		t.Error("the leader did not log the duplicate")
	}
	fetchOK(t, f, 2, []byte("still real"))
	if got := f.Stats().FetchDials; got != 1 {
		t.Errorf("the real node dialled %d times, want 1", got)
	}

	// A restarted follower's old stream has ended, so it gets in.
	f.Close()
	again := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: l.Addr().String()} })
	var last error
	eventually(t, "the restarted follower fetches", func() bool {
		_, last = again.Fetch(context.Background(), 2, []byte("restarted"))
		return last == nil
	})
}

func TestFetch_RefusedHandshakes(t *testing.T) {
	l := startNode(t, 2, func(c *Config) {
		c.FetchHandler = echo
		c.CheckIncarnation = func(node uint64, inc string) error {
			if inc == "wiped" {
				return fmt.Errorf("node %d registered from another data directory", node)
			}
			return nil
		}
	})
	noHandler := startNode(t, 3, nil)
	f := startNode(t, 1, nil)
	connect(f, l, noHandler)
	other := startNode(t, 4, func(c *Config) {
		c.ClusterID = "other-cluster"
		c.Peers = map[uint64]string{2: l.Addr().String()}
	})
	l.AddPeer(4, other.Addr().String())

	if _, err := other.Fetch(context.Background(), 2, nil); !errors.Is(err, ErrClusterID) {
		t.Errorf("fetch from another cluster: %v, want %v", err, ErrClusterID)
	}
	wiped := startNode(t, 5, func(c *Config) {
		c.Incarnation = "wiped"
		c.Peers = map[uint64]string{2: l.Addr().String()}
	})
	l.AddPeer(5, wiped.Addr().String())
	if _, err := wiped.Fetch(context.Background(), 2, nil); !errors.Is(err, ErrIncarnation) {
		t.Errorf("fetch from a wiped node: %v, want %v", err, ErrIncarnation)
	}
	_, err := f.Fetch(context.Background(), 3, nil)
	var re *RefusedError
	if !errors.Is(err, ErrNoFetchHandler) || !errors.As(err, &re) || re.Node != 3 {
		t.Errorf("fetch from a node without a handler: %v, want a RefusedError from node 3 wrapping %v", err, ErrNoFetchHandler)
	}
	if _, err := f.Fetch(context.Background(), 9, nil); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("fetch from an unknown node: %v, want %v", err, ErrUnknownPeer)
	}
	if got := l.Stats().FetchesServed; got != 0 {
		t.Errorf("%d requests served despite the refusals", got)
	}
}

// TestFetch_CloseWaitsForHandler: Close ends the leader's fetch streams and
// returns only once the handler under way has returned.
func TestFetch_CloseWaitsForHandler(t *testing.T) {
	b := newBlocker()
	f, l := fetchPair(t, b.handle)
	done := fetchAsync(f, context.Background(), 2, "slow")
	<-b.entered
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	if err := <-done; !errors.Is(err, ErrFetchAborted) {
		t.Fatalf("in-flight fetch at the leader's Close: %v, want %v", err, ErrFetchAborted)
	}
	// The stream is closed, so Close is under way; the handler still runs.
	select {
	case <-closed:
		t.Fatal("Close returned while a fetch handler was running")
	default:
	}
	close(b.release)
	<-closed
	if got := b.returned.Load(); got != 1 {
		t.Errorf("handler returned %d times before Close did, want 1", got)
	}
}

func TestFetch_RemovePeerFailsInFlightFetch(t *testing.T) {
	b := newBlocker()
	f, _ := fetchPair(t, b.handle)
	done := fetchAsync(f, context.Background(), 2, "slow")
	<-b.entered
	f.RemovePeer(2)
	if err := <-done; !errors.Is(err, ErrUnknownPeer) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("in-flight fetch at RemovePeer: %v, want %v saying removed", err, ErrUnknownPeer)
	}
	close(b.release)
}

func TestFetch_FetcherCloseFailsInFlightFetch(t *testing.T) {
	b := newBlocker()
	f, _ := fetchPair(t, b.handle)
	done := fetchAsync(f, context.Background(), 2, "slow")
	<-b.entered
	f.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight fetch at Close: %v, want %v", err, ErrClosed)
	}
	if _, err := f.Fetch(context.Background(), 2, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("fetch after Close: %v, want %v", err, ErrClosed)
	}
	close(b.release)
}

// TestFetch_StaleStreamIsReplaced: a fetch stream that stopped carrying
// requests (its fetcher's process froze or its network went half open)
// keeps the id only for the live window; then the fetcher's new stream is
// admitted and the old one closed.
func TestFetch_StaleStreamIsReplaced(t *testing.T) {
	l := startNode(t, 2, func(c *Config) {
		c.FetchHandler = echo
		c.KeepaliveInterval = 200 * time.Millisecond // a live window of 600 ms
		c.ReadTimeout = 2 * time.Second
	})
	l.AddPeer(1, "127.0.0.1:1")
	old := rawFetchStream(t, l, 1)
	if _, err := old.Write(appendFetchFrame(nil, fetchFrame{kind: kindFetchReq, budget: time.Second, body: []byte("x")})); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(old, 256, 1<<20)
	if kind, _, err := fr.next(); err != nil || kind != kindFetchResp {
		t.Fatalf("raw fetch: kind %d, %v", kind, err)
	}

	f := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: l.Addr().String()} })
	l.AddPeer(1, f.Addr().String())
	var last error
	eventually(t, "the new stream is admitted once the old one is stale", func() bool {
		_, last = f.Fetch(context.Background(), 2, []byte("new"))
		return last == nil
	})
	if f.Stats().FetchDialErrors == 0 {
		t.Error("the new stream was admitted while the old one was live")
	}
	if _, _, err := fr.next(); err == nil || isTimeout(err) {
		t.Errorf("the replaced stream is still open: %v", err)
	}
}
