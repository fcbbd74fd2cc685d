package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/internal/logging"
)

// hangGuard bounds every blocking socket operation in tests. Hitting it is
// a failure (a hang), not a timing assertion.
const hangGuard = 20 * time.Second

// eventually polls cond until it holds or the hang guard expires.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// recorder is an Observer that keeps close reasons, on top of stats.
type recorder struct {
	stats
	mu      sync.Mutex
	reasons map[uint64]error
	closed  map[uint64]bool
}

func (r *recorder) ConnClosed(c *Conn, reason error) {
	r.stats.ConnClosed(c, reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reasons == nil {
		r.reasons, r.closed = map[uint64]error{}, map[uint64]bool{}
	}
	r.reasons[c.ID()], r.closed[c.ID()] = reason, true
}

// closedReasons returns the reasons of all closed connections.
func (r *recorder) closedReasons() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []error
	for _, e := range r.reasons {
		out = append(out, e)
	}
	return out
}

func (r *recorder) anyClosedWith(target error) bool {
	for _, e := range r.closedReasons() {
		if errors.Is(e, target) {
			return true
		}
	}
	return false
}

type testServer struct {
	*Server
	obs  *recorder
	logs *logging.Buffer
}

// startServer starts a server on loopback with h and cfg changed by mod.
func startServer(t *testing.T, h Handler, mod func(*Config)) *testServer {
	t.Helper()
	return startServerHooks(t, h, mod, testHooks{})
}

func startServerHooks(t *testing.T, h Handler, mod func(*Config), hooks testHooks) *testServer {
	t.Helper()
	ts := &testServer{obs: &recorder{}, logs: &logging.Buffer{}}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Observer = ts.obs
	cfg.Logger = slog.New(slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if mod != nil {
		mod(&cfg)
	}
	s, err := start(cfg, h, hooks)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = s
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs.String())
		}
	})
	return ts
}

// rawClient speaks the wire protocol by hand so tests control framing.
type rawClient struct {
	t    *testing.T
	conn *net.TCPConn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, addr net.Addr) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c.(*net.TCPConn), br: bufio.NewReader(c)}
}

// encodeRequest frames req with correlation id corr and client id "test".
func encodeRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr)
}

func (r *rawClient) write(b []byte) {
	r.t.Helper()
	r.conn.SetWriteDeadline(time.Now().Add(hangGuard))
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// send writes reqs, pipelined in one write, with correlation ids first, first+1, ...
func (r *rawClient) send(first int32, reqs ...kmsg.Request) {
	r.t.Helper()
	var buf []byte
	for i, req := range reqs {
		buf = append(buf, encodeRequest(req, first+int32(i))...)
	}
	r.write(buf)
}

// readFrame reads one response frame: correlation id and the rest.
func (r *rawClient) readFrame() (int32, []byte, error) {
	r.conn.SetReadDeadline(time.Now().Add(hangGuard))
	var size [4]byte
	if _, err := io.ReadFull(r.br, size[:]); err != nil {
		return 0, nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.br, frame); err != nil {
		return 0, nil, err
	}
	if len(frame) < 4 {
		return 0, nil, errors.New("response frame shorter than its header")
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:], nil
}

// read reads one response to req and checks its correlation id.
func (r *rawClient) read(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	got, rest, err := r.readFrame()
	if err != nil {
		r.t.Fatalf("read response %d: %v", corr, err)
	}
	if got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp, err := decodeResponse(req, rest)
	if err != nil {
		r.t.Fatalf("decode response %d: %v", corr, err)
	}
	return resp
}

// decodeResponse decodes what follows the correlation id: the header v1
// tag section when flexible (never for ApiVersions), then the body.
func decodeResponse(req kmsg.Request, rest []byte) (kmsg.Response, error) {
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		rd := kbin.Reader{Src: rest}
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return nil, err
		}
		rest = rd.Src
	}
	resp := req.ResponseKind()
	return resp, resp.ReadFrom(rest)
}

// expectClosed reads until the server closes the connection.
func (r *rawClient) expectClosed() {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(hangGuard))
	_, err := io.Copy(io.Discard, r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("server did not close the connection")
	}
}

// ping does one ApiVersions round trip.
func (r *rawClient) ping(corr int32) {
	r.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	r.send(corr, req)
	resp := r.read(req, corr).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		r.t.Fatalf("ping: error code %d", resp.ErrorCode)
	}
}

func metadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	for _, tp := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func produceReq(version, acks int16, topics ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 1000
	for _, tp := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = tp
		for p := range int32(2) {
			pt := kmsg.NewProduceRequestTopicPartition()
			pt.Partition = p
			pt.Records = []byte("not a real batch " + strconv.Itoa(int(p)))
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}
