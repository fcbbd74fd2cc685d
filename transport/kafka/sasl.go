package kafka

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The SASL API keys, which the server answers itself on a SASL listener.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// SASLConfig makes a listener require SASL authentication (Kafka's
// SASL_PLAINTEXT and SASL_SSL): until a connection has authenticated it
// may send only ApiVersions, SaslHandshake and SaslAuthenticate.
type SASLConfig struct {
	// Mechanisms are the mechanisms offered, in Kafka's names; empty
	// offers every one auth.Mechanisms serves with the lookup.
	Mechanisms []string
	// Lookup returns the credentials to check, read anew for each
	// authentication (users change while connections live).
	Lookup func() auth.Lookup
	// ReauthAfter is Kafka's connections.max.reauth.ms (KIP-368): a
	// session authenticated through SaslAuthenticate v1+ lasts at most
	// this long (less when its token expires sooner); a request after it
	// closes the connection unless the client authenticated again. Zero:
	// sessions last as long as their credential.
	ReauthAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnAuth, when set, is told of every authentication's end: the
	// principal on success, else the error (for counting in /metrics).
	OnAuth func(c *Conn, mechanism, principal string, err error)
}

// ErrUnauthenticated closes a connection that sent a request before it
// authenticated, or after its session expired.
var ErrUnauthenticated = errors.New("kafka: request before SASL authentication")

// ErrSASLFailed closes a connection whose authentication failed, after
// the answer that says so.
var ErrSASLFailed = errors.New("kafka: SASL authentication failed")

// saslState is a connection's authentication. Only the reader goroutine
// touches it, except principal.
type saslState struct {
	session   auth.Session
	mechanism string
	v0        bool // SaslHandshake v0: the next frame is a bare token
	failed    bool
	authed    bool
	expiry    time.Time // zero: never
	principal atomic.Pointer[string]
}

// Principal is who the connection authenticated as ("User:<name>"): the
// SASL principal, else the one mapped from a verified TLS client
// certificate, else "User:ANONYMOUS", as Kafka's.
func (c *Conn) Principal() string {
	if p := c.sasl.principal.Load(); p != nil {
		return *p
	}
	if p := c.tls.principal.Load(); p != nil {
		return *p
	}
	return "User:ANONYMOUS"
}

func (s *SASLConfig) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SASLConfig) offered() []string {
	if len(s.Mechanisms) > 0 {
		return s.Mechanisms
	}
	return auth.Mechanisms(s.Lookup())
}

// saslAPIs are the ranges a SASL listener adds to the handler's.
func saslAPIs() []APIRange {
	return []APIRange{{Key: saslHandshakeKey, MinVersion: 0, MaxVersion: 1}, {Key: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2}}
}

// gate decides a request on a SASL listener before the handler sees it:
// handled says the server answered it (it), and an error closes the
// connection.
func (c *Conn) gate(it item, h Header, req kmsg.Request) (item, bool, error) {
	cfg, st := c.srv.cfg.SASL, &c.sasl
	switch {
	case st.failed:
		return it, false, ErrSASLFailed
	case h.Key == saslHandshakeKey:
		it.pending = Ready(c.handshake(req.(*kmsg.SASLHandshakeRequest)))
		return it, true, nil
	case h.Key == saslAuthenticateKey:
		resp, err := c.authenticate(req.(*kmsg.SASLAuthenticateRequest))
		it.pending = Ready(resp)
		return it, true, err
	case h.Key == apiVersionsKey:
		it.pending = advertiseSASL{c.start(&Request{Header: h, Body: req, Received: it.received})}
		return it, true, nil
	case !st.authed:
		return it, false, fmt.Errorf("%w: %s", ErrUnauthenticated, kmsg.NameForKey(h.Key))
	case !st.expiry.IsZero() && !cfg.now().Before(st.expiry):
		return it, false, fmt.Errorf("%w: the session expired at %s without re-authentication", ErrUnauthenticated, st.expiry.UTC().Format(time.RFC3339))
	}
	return it, false, nil
}

// handshake picks the mechanism and starts a session for it.
func (c *Conn) handshake(req *kmsg.SASLHandshakeRequest) kmsg.Response {
	cfg, st := c.srv.cfg.SASL, &c.sasl
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = cfg.offered()
	if st.session != nil && !st.session.Done() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	if !slices.Contains(resp.SupportedMechanisms, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp
	}
	s, err := auth.NewSession(req.Mechanism, cfg.Lookup(), cfg.Now)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp
	}
	st.session, st.mechanism, st.v0 = s, req.Mechanism, req.Version == 0
	return resp
}

// authenticate steps the session with one SaslAuthenticate token.
func (c *Conn) authenticate(req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	st := &c.sasl
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if st.session == nil || st.session.Done() || st.v0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 before it"
		resp.ErrorMessage = &msg
		st.failed = true
		return resp, nil
	}
	out, err := c.step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: invalid credentials"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if st.session.Done() && req.Version >= 1 && !st.expiry.IsZero() {
		resp.SessionLifetimeMillis = max(1, st.expiry.Sub(c.srv.cfg.SASL.now()).Milliseconds())
	}
	return resp, nil
}

// step feeds a token to the session and, when it ends, records who
// authenticated and until when. A re-authentication must name the same
// principal (KIP-368).
func (c *Conn) step(token []byte) ([]byte, error) {
	cfg, st := c.srv.cfg.SASL, &c.sasl
	out, err := st.session.Step(token)
	if err == nil && !st.session.Done() {
		return out, nil
	}
	p := ""
	if err == nil {
		p = st.session.Principal()
		if prev := st.principal.Load(); prev != nil && *prev != p {
			err = fmt.Errorf("%w: re-authenticated as %s, not %s", auth.ErrAuthFailed, p, *prev)
		}
	}
	if cfg.OnAuth != nil {
		cfg.OnAuth(c, st.mechanism, p, err)
	}
	if err != nil {
		st.failed = true
		c.log.Info("SASL authentication failed", "mechanism", st.mechanism, "err", err)
		return nil, err
	}
	st.authed = true
	st.principal.Store(&p)
	st.expiry = sessionExpiry(cfg, st.session)
	return out, nil
}

// sessionExpiry is the earlier of the credential's expiry and
// ReauthAfter from now; zero when neither applies.
func sessionExpiry(cfg *SASLConfig, s auth.Session) time.Time {
	exp := s.Expiry()
	if cfg.ReauthAfter > 0 {
		if r := cfg.now().Add(cfg.ReauthAfter); exp.IsZero() || r.Before(exp) {
			exp = r
		}
	}
	return exp
}

// rawToken answers a bare SASL token, the frame after SaslHandshake v0:
// the answer is a bare token too, written in order with the rest.
func (c *Conn) rawToken(frame []byte, received time.Time) (item, error) {
	st := &c.sasl
	st.v0 = false
	out, err := c.step(frame)
	if err != nil {
		// Kafka closes a v0 connection that failed: there is no
		// error code to send in a bare token.
		return item{}, fmt.Errorf("%w (SaslHandshake v0 framing)", ErrSASLFailed)
	}
	if !st.session.Done() {
		st.v0 = true // the next frame is the next token
	}
	return item{key: saslAuthenticateKey, raw: true, pending: Ready(rawResponse(out)), received: received}, nil
}

// rawResponse carries a bare token through the writer.
type rawResponse []byte

func (r rawResponse) Key() int16                { return saslAuthenticateKey }
func (r rawResponse) MaxVersion() int16         { return 0 }
func (r rawResponse) SetVersion(int16)          {}
func (r rawResponse) GetVersion() int16         { return 0 }
func (r rawResponse) IsFlexible() bool          { return false }
func (r rawResponse) AppendTo(b []byte) []byte  { return append(b, r...) }
func (r rawResponse) ReadFrom([]byte) error     { return errors.New("raw SASL token: write only") }
func (r rawResponse) RequestKind() kmsg.Request { return nil }

// advertiseSASL adds the SASL keys to the handler's ApiVersions answer:
// the handler need not know which of its listeners require SASL.
type advertiseSASL struct{ Pending }

func (a advertiseSASL) Result() (kmsg.Response, error) {
	resp, err := a.Pending.Result()
	av, ok := resp.(*kmsg.ApiVersionsResponse)
	if err != nil || !ok || av.ErrorCode != 0 {
		return resp, err
	}
	for _, r := range saslAPIs() {
		if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == r.Key }) {
			av.ApiKeys = append(av.ApiKeys, APIKeys([]APIRange{r})...)
		}
	}
	return av, nil
}
