package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/raftq/raftq/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslUsers is a credential lookup over alice and bob (SCRAM-SHA-256
// and -512), in memory: the transport is tested on its own here.
func saslUsers(t testing.TB) func() auth.Lookup {
	t.Helper()
	creds := map[[2]string]auth.Credential{}
	for _, u := range []string{"alice", "bob"} {
		for _, m := range auth.ScramMechanisms() {
			c, err := auth.NewCredential(m, u+"-pw", auth.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[[2]string{u, m}] = c
		}
	}
	l := auth.Lookup{DecoyKey: []byte("test decoy key"), Scram: func(u, m string) (auth.Credential, bool) {
		c, ok := creds[[2]string{u, m}]
		return c, ok
	}}
	return func() auth.Lookup { return l }
}

// authLog records OnAuth calls.
type authLog struct {
	mu   sync.Mutex
	ok   []string
	fail int
}

func (a *authLog) on(_ *Conn, _, principal string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.fail++
		return
	}
	a.ok = append(a.ok, principal)
}

func saslServer(t *testing.T, f *fakeHandler, mod func(*SASLConfig)) (*testServer, *authLog) {
	t.Helper()
	log := &authLog{}
	cfg := &SASLConfig{Lookup: saslUsers(t), OnAuth: log.on}
	if mod != nil {
		mod(cfg)
	}
	return startServer(t, f, func(c *Config) { c.SASL = cfg }), log
}

// metadataWith asks for metadata through a kgo client authenticating
// with m (none when nil).
func metadataWith(t *testing.T, addr string, m sasl.Mechanism) error {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, metadataReq(kmsg.NewPtrMetadataRequest().MaxVersion(), "t"))
	return err
}

// TestSASL_FranzGoClients: franz-go authenticates with SCRAM-SHA-256,
// SCRAM-SHA-512 and PLAIN and asks for metadata; the handler sees the principal.
// A wrong password gets SASL_AUTHENTICATION_FAILED and the handler sees
// nothing of it; a client without SASL is closed before its Metadata.
func TestSASL_FranzGoClients(t *testing.T) {
	f := newFake()
	ts, log := saslServer(t, f, nil)
	f.addr = ts.Addr
	addr := ts.Addr().String()
	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(),
		scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
	} {
		if err := metadataWith(t, addr, m); err != nil {
			t.Errorf("%s: %v", m.Name(), err)
		}
	}
	for _, c := range f.conns() {
		if c.Principal() != "User:alice" {
			t.Errorf("handler saw principal %q", c.Principal())
		}
	}
	served := len(f.requests())
	err := metadataWith(t, addr, scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism())
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := metadataWith(t, addr, nil); err == nil {
		t.Error("a client without SASL produced")
	}
	for _, r := range f.requests()[served:] {
		if r.Header.Key != apiVersionsKey {
			t.Errorf("the handler served %s of an unauthenticated connection", kmsg.NameForKey(r.Header.Key))
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.ok) != 3 || log.fail < 1 {
		t.Errorf("OnAuth saw %d successes %v and %d failures", len(log.ok), log.ok, log.fail)
	}
}

// rawToken writes a bare SASL token frame and reads the bare answer.
func (r *rawClient) rawToken(tok []byte) ([]byte, error) {
	r.t.Helper()
	r.write(binary.BigEndian.AppendUint32(nil, uint32(len(tok))))
	r.write(tok)
	r.conn.SetReadDeadline(time.Now().Add(hangGuard))
	var size [4]byte
	if _, err := io.ReadFull(r.br, size[:]); err != nil {
		return nil, err
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r.br, out)
	return out, err
}

func handshakeReq(version int16, mech string) *kmsg.SASLHandshakeRequest {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(version)
	req.Mechanism = mech
	return req
}

func authenticateReq(version int16, tok string) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(version)
	req.SASLAuthBytes = []byte(tok)
	return req
}

// handshake sends SaslHandshake and returns its error code.
func (r *rawClient) handshake(corr int32, version int16, mech string) int16 {
	r.t.Helper()
	req := handshakeReq(version, mech)
	r.send(corr, req)
	return r.read(req, corr).(*kmsg.SASLHandshakeResponse).ErrorCode
}

// authenticate sends one SaslAuthenticate and returns the response.
func (r *rawClient) authenticate(corr int32, version int16, tok string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	req := authenticateReq(version, tok)
	r.send(corr, req)
	return r.read(req, corr).(*kmsg.SASLAuthenticateResponse)
}

func (r *rawClient) metadata(corr int32) {
	r.t.Helper()
	req := metadataReq(9, "t")
	r.send(corr, req)
	r.read(req, corr)
}

// TestSASL_HandshakeV0Framing: after SaslHandshake v0 the token travels
// bare, and the connection then serves requests as its principal; a
// wrong bare token closes the connection.
func TestSASL_HandshakeV0Framing(t *testing.T) {
	f := newFake()
	ts, _ := saslServer(t, f, nil)
	f.addr = ts.Addr
	r := dialRaw(t, ts.Addr())
	if code := r.handshake(1, 0, auth.Plain); code != 0 {
		t.Fatalf("handshake v0: %v", kerr.ErrorForCode(code))
	}
	if out, err := r.rawToken([]byte("\x00alice\x00alice-pw")); err != nil || len(out) != 0 {
		t.Fatalf("bare PLAIN token: %q, %v", out, err)
	}
	r.metadata(2)
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Header.Key != 3 || f.conns()[0].Principal() != "User:alice" {
		t.Fatalf("handler saw %d requests, principal %q", len(reqs), f.conns()[0].Principal())
	}

	r = dialRaw(t, ts.Addr())
	if code := r.handshake(1, 0, auth.Plain); code != 0 {
		t.Fatalf("handshake v0: %v", kerr.ErrorForCode(code))
	}
	if _, err := r.rawToken([]byte("\x00alice\x00wrong")); err == nil {
		t.Fatal("a wrong bare token was answered")
	}
	r.expectClosed()
}

// TestSASL_BadSequences: a request before authentication closes the
// connection unseen by the handler; SaslAuthenticate without a
// handshake is ILLEGAL_SASL_STATE and ends the connection; an unknown
// mechanism is UNSUPPORTED_SASL_MECHANISM with the list.
func TestSASL_BadSequences(t *testing.T) {
	f := newFake()
	ts, _ := saslServer(t, f, nil)
	f.addr = ts.Addr

	r := dialRaw(t, ts.Addr())
	r.ping(1) // ApiVersions is allowed, and advertises the SASL keys
	r.send(2, metadataReq(9, "t"))
	r.expectClosed()

	r = dialRaw(t, ts.Addr())
	if resp := r.authenticate(1, 1, "\x00alice\x00alice-pw"); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate first: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	r.send(2, metadataReq(9, "t"))
	r.expectClosed()

	r = dialRaw(t, ts.Addr())
	req := handshakeReq(1, "GSSAPI")
	r.send(1, req)
	resp := r.read(req, 1).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI: %v, mechanisms %v", kerr.ErrorForCode(resp.ErrorCode), resp.SupportedMechanisms)
	}
	for _, r := range f.requests() {
		if r.Header.Key != apiVersionsKey {
			t.Errorf("the handler served %s before authentication", kmsg.NameForKey(r.Header.Key))
		}
	}
}

// TestSASL_AdvertisedInApiVersions: the handler's ApiVersions answer
// gains SaslHandshake and SaslAuthenticate on a SASL listener.
func TestSASL_AdvertisedInApiVersions(t *testing.T) {
	f := newFake()
	ts, _ := saslServer(t, f, nil)
	r := dialRaw(t, ts.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	r.send(1, req)
	resp := r.read(req, 1).(*kmsg.ApiVersionsResponse)
	got := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = k.MaxVersion
	}
	if got[saslHandshakeKey] != 1 || got[saslAuthenticateKey] != 2 {
		t.Fatalf("advertised %v, want SaslHandshake v1 and SaslAuthenticate v2", got)
	}
}

// TestSASL_ReauthenticationAndExpiry (KIP-368): a session lasts
// ReauthAfter; authenticating again as the same principal extends it, as
// another principal fails; a request past the expiry closes the
// connection.
func TestSASL_ReauthenticationAndExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := newFake()
	ts, _ := saslServer(t, f, func(c *SASLConfig) { c.ReauthAfter = time.Minute; c.Now = clock })
	f.addr = ts.Addr

	r := dialRaw(t, ts.Addr())
	login := func(corr int32, user string) *kmsg.SASLAuthenticateResponse {
		if code := r.handshake(corr, 1, auth.Plain); code != 0 {
			t.Fatalf("handshake: %v", kerr.ErrorForCode(code))
		}
		return r.authenticate(corr+1, 2, "\x00"+user+"\x00"+user+"-pw")
	}
	if resp := login(1, "alice"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 60_000 {
		t.Fatalf("login: %v, lifetime %d ms", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	r.metadata(3)
	advance(30 * time.Second)
	if resp := login(4, "alice"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 60_000 {
		t.Fatalf("re-authentication: %v, lifetime %d ms", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	advance(45 * time.Second) // past the first session's end, inside the second's
	r.metadata(6)
	advance(16 * time.Second)
	r.send(7, metadataReq(9, "t"))
	r.expectClosed()

	r = dialRaw(t, ts.Addr())
	login(1, "alice")
	if resp := login(3, "bob"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another user: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	r.send(5, metadataReq(9, "t"))
	r.expectClosed()
}
