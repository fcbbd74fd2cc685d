package kafka

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkPipelined measures small requests through the whole server
// (frame, decode, Serve, Ready, encode, ordered write) on loopback against
// a baseline in the same run: a plain TCP server that reads each frame and
// writes back the same number of bytes the real server answers with.
//
//	go test -run '^$' -bench Pipelined -count 5 ./transport/kafka/
func BenchmarkPipelined(b *testing.B) {
	benchPipelined(b, metadataReq(12, "bench"))
}

// BenchmarkPipelinedBulk is BenchmarkPipelined with requests and
// responses of about 10 KiB (Metadata for 256 topics), where TLS costs
// per byte rather than per request.
//
//	go test -run '^$' -bench PipelinedBulk -count 5 ./transport/kafka/
func BenchmarkPipelinedBulk(b *testing.B) {
	topics := make([]string, 256)
	for i := range topics {
		topics[i] = fmt.Sprintf("bulk-topic-%03d-%s", i, strings.Repeat("x", 16))
	}
	benchPipelined(b, metadataReq(12, topics...))
}

func benchPipelined(b *testing.B, req *kmsg.MetadataRequest) {
	frame := encodeRequest(req, 1)
	respLen := len(fakeBody(req)) + 4 + 1 // correlation id, header tags

	b.Run("server", func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		s, err := Start(cfg, benchHandler{newFake()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		runPipelined(b, s.Addr(), frame, respLen)
	})
	b.Run("server-tls", func(b *testing.B) {
		// The same over TLS 1.3 (ECDSA P-256, AES-GCM or ChaCha20 as
		// crypto/tls picks), handshake outside the timing.
		p := newTestPKI(b)
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.TLS = p.server.ServerConfig(tls.NoClientCert)
		s, err := Start(cfg, benchHandler{newFake()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		c, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: p.pool})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Handshake(); err != nil {
			b.Fatal(err)
		}
		runPipelinedOn(b, c, frame, respLen)
	})
	b.Run("server-fixed-response", func(b *testing.B) {
		// The handler's own work left out: one prebuilt response, shared
		// (only this connection's writer reads it).
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		fixed := newFake().answer(&Request{Body: req})
		s, err := Start(cfg, fixedHandler{apis: fakeAPIs(), resp: fixed})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		runPipelined(b, s.Addr(), frame, respLen)
	})
	b.Run("echo-baseline", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go echoServe(ln, respLen)
		runPipelined(b, ln.Addr(), frame, respLen)
	})
}

// runPipelined writes b.N copies of frame on one connection while reading
// b.N responses of respLen bytes (plus size prefix).
func runPipelined(b *testing.B, addr net.Addr, frame []byte, respLen int) {
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		b.Fatal(err)
	}
	runPipelinedOn(b, c, frame, respLen)
}

// runPipelinedOn is runPipelined on a connection it then closes.
func runPipelinedOn(b *testing.B, c net.Conn, frame []byte, respLen int) {
	defer c.Close()
	b.SetBytes(int64(len(frame) + 4 + respLen))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(c, 64<<10)
		for range b.N {
			if _, err := bw.Write(frame); err != nil {
				errc <- err
				return
			}
		}
		errc <- bw.Flush()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	buf := make([]byte, 4+respLen)
	for i := range b.N {
		if _, err := io.ReadFull(br, buf); err != nil {
			b.Fatalf("response %d: %v", i, err)
		}
		if n := binary.BigEndian.Uint32(buf); int(n) != respLen {
			b.Fatalf("response %d: %d bytes, want %d", i, n, respLen)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// echoServe answers each size-prefixed frame with respLen bytes, flushing
// when no more input is buffered, like the real writer.
func echoServe(ln net.Listener, respLen int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
			resp := binary.BigEndian.AppendUint32(nil, uint32(respLen))
			resp = append(resp, make([]byte, respLen)...)
			var size [4]byte
			for {
				if _, err := io.ReadFull(br, size[:]); err != nil {
					return
				}
				if _, err := br.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
					return
				}
				bw.Write(resp)
				if br.Buffered() == 0 && bw.Flush() != nil {
					return
				}
			}
		}()
	}
}

// benchHandler answers like the fake without recording requests.
type benchHandler struct{ f *fakeHandler }

func (h benchHandler) APIs() []APIRange { return h.f.apis }

func (h benchHandler) Serve(_ *Conn, req *Request) Pending { return Ready(h.f.answer(req)) }

// fixedHandler answers every request with the same response.
type fixedHandler struct {
	apis []APIRange
	resp kmsg.Response
}

func (h fixedHandler) APIs() []APIRange { return h.apis }

func (h fixedHandler) Serve(*Conn, *Request) Pending { return Ready(h.resp) }
