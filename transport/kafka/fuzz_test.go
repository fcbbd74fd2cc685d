package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const fuzzMaxFrame = 1 << 16

// fuzzSeeds are valid pipelines, each followed by some damage.
func fuzzSeeds() [][]byte {
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1"
	avNew := kmsg.NewPtrApiVersionsRequest()
	avNew.SetVersion(5)
	valid := [][]byte{
		encodeRequest(av, 1),
		encodeRequest(avNew, 1),
		encodeRequest(metadataReq(12, "a", "b"), 2),
		encodeRequest(metadataReq(1, "a"), 3),
		encodeRequest(metadataReq(0), 3),
		encodeRequest(produceReq(9, 1, "a"), 4),
		encodeRequest(produceReq(9, 0, "a"), 5),
		encodeRequest(produceReq(2, 1, "a"), 6),
		encodeWithHeaderTags(metadataReq(12, "t"), 7, 1, []byte("x")),
		encodeRequest(kmsg.NewPtrDescribeClusterRequest(), 8),
	}
	var seeds [][]byte
	var all []byte
	for _, v := range valid {
		seeds = append(seeds, v, v[:len(v)/2])
		all = append(all, v...)
	}
	return append(seeds, all,
		append(append([]byte(nil), all...), 0xff, 0xff, 0xff, 0xff),
		[]byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0},
		binary.BigEndian.AppendUint32(nil, fuzzMaxFrame+1))
}

// FuzzDecodeRequest feeds arbitrary bytes to the frame and header decoder:
// no panic, only the package's errors, and what decodes re-encodes to the
// same header and a stable body.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			frame, err := readFrame(r, fuzzMaxFrame)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("readFrame: unexpected error %v", err)
				}
				return
			}
			checkFrame(t, frame)
		}
	})
}

func checkFrame(t *testing.T, frame []byte) {
	h, req, body, err := decodeHeader(frame)
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("decodeHeader: unexpected error %v", err)
		}
		return
	}
	if h.Key != 7 || h.Version != 0 {
		var opts []kmsg.RequestFormatterOpt
		if h.ClientID != nil {
			opts = append(opts, kmsg.FormatterClientID(*h.ClientID))
		}
		wire := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, h.CorrelationID)
		h2, _, _, err := decodeHeader(wire[4:])
		if err != nil || h2.Key != h.Key || h2.Version != h.Version || h2.CorrelationID != h.CorrelationID ||
			(h2.ClientID == nil) != (h.ClientID == nil) || (h.ClientID != nil && *h2.ClientID != *h.ClientID) {
			t.Fatalf("header %+v re-decodes as %+v (%v)", h, h2, err)
		}
	}
	if h.Version > req.MaxVersion() {
		return
	}
	if err := decodeBody(h, req, body); err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("decodeBody: unexpected error %v", err)
		}
		return
	}
	enc := req.AppendTo(nil)
	again := kmsg.RequestForKey(h.Key)
	again.SetVersion(h.Version)
	if err := again.ReadFrom(enc); err != nil {
		t.Fatalf("%s v%d re-encoding does not decode: %v", kmsg.NameForKey(h.Key), h.Version, err)
	}
	if !bytes.Equal(again.AppendTo(nil), enc) {
		t.Fatalf("%s v%d encoding is not stable", kmsg.NameForKey(h.Key), h.Version)
	}
}

// fuzzHandler answers like the fake but completes every request on its
// own goroutine, so completions race and the writer must reorder.
func fuzzHandler() *fakeHandler {
	f := newFake()
	f.apis = append(f.apis, APIRange{Key: 60, MinVersion: 0, MaxVersion: 1}) // DescribeCluster
	f.serve = func(c *Conn, req *Request) Pending {
		fut := NewFuture()
		go func() {
			if req.Header.ClientID != nil && *req.Header.ClientID == "fail" {
				fut.Complete(nil, errors.New("fuzz failure"))
				return
			}
			fut.Complete(f.answer(req), nil)
		}()
		return fut
	}
	return f
}

// FuzzServeConn sends arbitrary bytes to a live server over loopback: no
// panic; the connection ends with responses whose correlation ids follow
// the request order; the server keeps serving new connections.
func FuzzServeConn(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.MaxFrameBytes = fuzzMaxFrame
	cfg.MaxInFlight = 4
	cfg.ReadTimeout = 5 * time.Second
	h := fuzzHandler()
	srv, err := Start(cfg, h)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		h.mu.Lock()
		h.seen, h.conn = nil, nil // keep memory flat across iterations
		h.mu.Unlock()
		c, err := net.DialTimeout("tcp", srv.Addr().String(), hangGuard)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangGuard))
		go func() {
			c.Write(data) // fails harmlessly if the server closed first
			c.(*net.TCPConn).CloseWrite()
		}()
		corrs := readAllResponses(t, c)
		if !isSubsequence(corrs, requestCorrs(data)) {
			t.Fatalf("response correlation ids %v are not in request order %v", corrs, requestCorrs(data))
		}
		pingServer(t, srv.Addr())
	})
}

// readAllResponses reads response frames until the server closes and
// returns their correlation ids.
func readAllResponses(t *testing.T, c net.Conn) []int32 {
	var corrs []int32
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			failOnHang(t, err)
			return corrs
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 4 || n > 1<<20 {
			t.Fatalf("response frame of %d bytes", n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			failOnHang(t, err)
			t.Fatalf("response frame cut short: %v", err)
		}
		corrs = append(corrs, int32(binary.BigEndian.Uint32(frame)))
	}
}

func failOnHang(t *testing.T, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server neither answered nor closed the connection")
	}
}

// requestCorrs splits data into frames as a client would have meant them
// and returns their correlation ids, up to the first impossible frame.
func requestCorrs(data []byte) []int32 {
	var out []int32
	for len(data) >= 4 {
		size := int32(binary.BigEndian.Uint32(data))
		if size < minFrameBytes || size > fuzzMaxFrame || int(size) > len(data)-4 {
			break
		}
		out = append(out, int32(binary.BigEndian.Uint32(data[8:])))
		data = data[4+size:]
	}
	return out
}

func isSubsequence(sub, of []int32) bool {
	i := 0
	for _, v := range of {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}

func pingServer(t *testing.T, addr net.Addr) {
	c, err := net.DialTimeout("tcp", addr.String(), hangGuard)
	if err != nil {
		t.Fatalf("server stopped accepting: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangGuard))
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(encodeRequest(req, 1)); err != nil {
		t.Fatalf("ping write: %v", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("server stopped answering: %v", err)
	}
}
