package kafka

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/raftq/raftq/auth"
)

// FuzzServeSASLConn sends arbitrary bytes to a SASL listener: the
// server answers or closes (never hangs, never panics), and the handler
// serves nothing but ApiVersions to a connection that did not
// authenticate.
func FuzzServeSASLConn(f *testing.F) {
	plainTok := "\x00alice\x00alice-pw"
	v1 := append(encodeRequest(handshakeReq(1, auth.Plain), 1), encodeRequest(authenticateReq(1, plainTok), 2)...)
	v0 := append(encodeRequest(handshakeReq(0, auth.Plain), 1), binary.BigEndian.AppendUint32(nil, uint32(len(plainTok)))...)
	v0 = append(v0, plainTok...)
	scram := append(encodeRequest(handshakeReq(1, auth.ScramSHA256), 1), encodeRequest(authenticateReq(1, "n,,n=alice,r=abc"), 2)...)
	meta := encodeRequest(metadataReq(9, "t"), 3)
	for _, s := range [][]byte{v1, v0, scram, append(v1, meta...), append(v0, meta...), meta,
		encodeRequest(authenticateReq(1, plainTok), 1), append(encodeRequest(handshakeReq(1, "GSSAPI"), 1), meta...)} {
		f.Add(s)
	}
	h := newFake()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.MaxFrameBytes = fuzzMaxFrame
	cfg.ReadTimeout = 5 * time.Second
	cfg.SASL = &SASLConfig{Lookup: saslUsers(f)}
	srv, err := Start(cfg, h)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h.addr = srv.Addr

	f.Fuzz(func(t *testing.T, data []byte) {
		h.mu.Lock()
		h.seen, h.conn = nil, nil
		h.mu.Unlock()
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
		for i, r := range h.requests() {
			if r.Header.Key != apiVersionsKey && h.conns()[i].Principal() != "User:alice" {
				t.Fatalf("served %d to a connection that did not authenticate", r.Header.Key)
			}
		}
	})
}
