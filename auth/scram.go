package auth

import (
	"fmt"
	"time"

	"github.com/xdg-go/scram"
)

// scramSession runs RFC 5802's exchange with xdg-go/scram's server: the
// client-first message, then the client-final one with its proof.
type scramSession struct {
	failed
	conv  *scram.ServerConversation
	known bool
	done  bool
}

// newScramSession starts a SCRAM exchange; nonce, when not nil, fixes the
// server's part of the nonce (the RFC test vectors).
func newScramSession(mechanism string, l Lookup, nonce scram.NonceGeneratorFcn) (*scramSession, error) {
	hg, _ := hashFor(mechanism)
	s := &scramSession{}
	srv, err := hg.NewServer(func(user string) (scram.StoredCredentials, error) {
		c, known := l.credential(user, mechanism)
		s.known = known
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
			StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: %s server: %w", mechanism, err)
	}
	if nonce != nil {
		srv = srv.WithNonceGenerator(nonce)
	}
	s.conv = srv.NewConversation()
	return s, nil
}

func (s *scramSession) Step(token []byte) ([]byte, error) {
	if err := s.check(s.done, token); err != nil {
		return nil, err
	}
	out, err := s.conv.Step(string(token))
	if err != nil {
		return nil, s.fail(err)
	}
	if s.conv.Done() {
		// A decoy's proof never verifies, but be explicit: only a
		// stored credential authenticates.
		if !s.conv.Valid() || !s.known {
			return nil, s.fail(nil)
		}
		if a := s.conv.AuthzID(); a != "" && a != s.conv.Username() {
			return nil, s.fail(fmt.Errorf("authorization id %q differs from user %q", a, s.conv.Username()))
		}
		s.done = true
	}
	return []byte(out), nil
}

func (s *scramSession) Done() bool        { return s.done }
func (s *scramSession) Principal() string { return principal(s.conv.Username()) }
func (s *scramSession) Expiry() time.Time { return time.Time{} }
