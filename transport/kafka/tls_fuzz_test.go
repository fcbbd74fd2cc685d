package kafka

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzTLSHandshake sends arbitrary bytes to a TLS listener requiring
// client certificates: the server closes (never hangs, never panics) and
// the handler never sees a request, since no input can complete a
// handshake with a verified certificate.
func FuzzTLSHandshake(f *testing.F) {
	hello := []byte{0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b, 0x03, 0x03}
	for _, s := range [][]byte{nil, hello, hello[:5], encodeRequest(metadataReq(9, "t"), 1),
		{0x16, 0x03, 0x03, 0xff, 0xff}, {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}, []byte("GET / HTTP/1.1\r\n\r\n")} {
		f.Add(s)
	}
	p := newTestPKI(f)
	h := newFake()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.TLS = p.server.ServerConfig(tls.RequireAndVerifyClientCert)
	cfg.TLSHandshakeTimeout = 2 * time.Second
	srv, err := Start(cfg, h)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.DialTimeout("tcp", srv.Addr().String(), hangGuard)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangGuard))
		go func() {
			c.Write(data)
			c.(*net.TCPConn).CloseWrite()
		}()
		_, err = io.Copy(io.Discard, c)
		failOnHang(t, err)
		if n := len(h.requests()); n != 0 {
			t.Fatalf("the handler saw %d requests", n)
		}
	})
}
