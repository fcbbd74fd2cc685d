package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xdg-go/scram"
)

// scramSession is the server side of RFC 5802's exchange: the
// client-first message, then the client-final one with its proof.
//
// It is ours rather than xdg-go/scram's server for one reason: Kafka's
// server takes a client-final nonce that ends with the nonce it sent
// (ScramSaslServer's endsWith), and librdkafka relies on it, sending its
// own nonce before the whole server nonce. The keys and proofs are RFC
// 5802's exactly; xdg-go derives the credentials (credential.go).
type scramSession struct {
	failed
	hg    scram.HashGeneratorFcn
	l     Lookup
	mech  string
	nonce func() string

	user, authz   string
	cred          Credential
	known         bool
	gs2, c1bare   string
	s1, fullNonce string
	step          int
	done          bool
}

// newScramSession starts a SCRAM exchange; nonce, when not nil, fixes the
// server's part of the nonce (the RFC test vectors).
func newScramSession(mechanism string, l Lookup, nonce func() string) (*scramSession, error) {
	hg, ok := hashFor(mechanism)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	if nonce == nil {
		nonce = alnumNonce
	}
	return &scramSession{hg: hg, l: l, mech: mechanism, nonce: nonce}, nil
}

// alnumNonce is the server's part of a SCRAM nonce: crypto/rand.Text,
// 26 letters and digits, as Kafka's are alphanumeric.
func alnumNonce() string { return rand.Text() }

func (s *scramSession) Step(token []byte) ([]byte, error) {
	if err := s.check(s.done, token); err != nil {
		return nil, err
	}
	var out string
	var err error
	switch s.step {
	case 0:
		out, err = s.clientFirst(string(token))
	default:
		out, err = s.clientFinal(string(token))
	}
	s.step++
	if err != nil {
		return nil, s.fail(err)
	}
	return []byte(out), nil
}

// clientFirst takes "gs2-header client-first-message-bare" and answers
// with the server-first message. Channel binding is not offered.
func (s *scramSession) clientFirst(c1 string) (string, error) {
	f := strings.SplitN(c1, ",", 3)
	if len(f) != 3 || (f[0] != "n" && f[0] != "y") {
		return "", errors.New("client-first message without a gs2 header of n or y (channel binding is not offered)")
	}
	if f[1] != "" {
		a, ok := strings.CutPrefix(f[1], "a=")
		if !ok || a == "" {
			return "", fmt.Errorf("gs2 authzid %q", f[1])
		}
		if s.authz, ok = decodeSaslName(a); !ok {
			return "", errors.New("bad authzid encoding")
		}
	}
	s.gs2, s.c1bare = f[0]+","+f[1]+",", f[2]
	attrs := strings.Split(s.c1bare, ",")
	if len(attrs) < 2 || strings.HasPrefix(attrs[0], "m=") {
		return "", errors.New("client-first message without user and nonce, or with a mandatory extension")
	}
	name, ok1 := strings.CutPrefix(attrs[0], "n=")
	cnonce, ok2 := strings.CutPrefix(attrs[1], "r=")
	if !ok1 || !ok2 || name == "" || cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return "", errors.New("client-first message: bad user or nonce")
	}
	var ok bool
	if s.user, ok = decodeSaslName(name); !ok {
		return "", errors.New("bad user name encoding")
	}
	if s.authz != "" && s.authz != s.user {
		return "", fmt.Errorf("authorization id %q differs from user %q", s.authz, s.user)
	}
	s.cred, s.known = s.l.credential(s.user, s.mech)
	s.fullNonce = cnonce + s.nonce()
	s.s1 = "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return s.s1, nil
}

// clientFinal checks "c=...,r=...[,ext],p=proof" and answers with the
// server signature.
func (s *scramSession) clientFinal(c2 string) (string, error) {
	cut := strings.LastIndex(c2, ",p=")
	if cut < 0 {
		return "", errors.New("client-final message without a proof")
	}
	withoutProof := c2[:cut]
	proof, err := base64.StdEncoding.DecodeString(c2[cut+3:])
	if err != nil {
		return "", fmt.Errorf("proof: %w", err)
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return "", errors.New("client-final message: channel binding does not match the gs2 header")
	}
	r, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !strings.HasSuffix(r, s.fullNonce) {
		// Kafka's rule (endsWith): librdkafka repeats its own nonce
		// before the server's.
		return "", errors.New("client-final nonce does not end with the server's")
	}
	authMsg := s.c1bare + "," + s.s1 + "," + withoutProof
	sig := hmacSum(s.hg, s.cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return "", errors.New("proof of the wrong length")
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	h := s.hg()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), s.cred.StoredKey) || !s.known {
		return "", errors.New("challenge proof invalid")
	}
	s.done = true
	return "v=" + base64.StdEncoding.EncodeToString(hmacSum(s.hg, s.cred.ServerKey, authMsg)), nil
}

// decodeSaslName undoes RFC 5802's =2C and =3D escapes; any other '='
// is malformed.
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

func (s *scramSession) Done() bool        { return s.done }
func (s *scramSession) Principal() string { return principal(s.user) }
func (s *scramSession) Expiry() time.Time { return time.Time{} }
