package auth

import (
	"bytes"
	"crypto/hmac"
	"fmt"
	"time"

	"github.com/xdg-go/scram"
)

// plainSession is RFC 4616's PLAIN: one token, authzid NUL authcid NUL
// password, checked against the user's SCRAM credential.
type plainSession struct {
	failed
	l    Lookup
	user string
	done bool
}

func (s *plainSession) Step(token []byte) ([]byte, error) {
	if err := s.check(s.done, token); err != nil {
		return nil, err
	}
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, s.fail(fmt.Errorf("PLAIN token of %d fields, want 3", len(parts)))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || pass == "" {
		return nil, s.fail(fmt.Errorf("PLAIN token without a user or password"))
	}
	if authz != "" && authz != user {
		return nil, s.fail(fmt.Errorf("authorization id %q differs from user %q", authz, user))
	}
	if !s.verify(user, pass) {
		return nil, s.fail(nil)
	}
	s.user, s.done = user, true
	return nil, nil
}

// verify derives StoredKey from pass with the user's (or a decoy's) salt
// and iterations and compares it in constant time: an unknown user costs
// what a wrong password does.
func (s *plainSession) verify(user, pass string) bool {
	// The decoy is derived for a known user too, as in SCRAM, so that
	// both cost the same.
	c, known := s.l.decoy(user, Plain), false
	if s.l.Scram != nil {
		byMechanism := map[string]Credential{}
		for _, m := range ScramMechanisms() {
			if got, ok := s.l.Scram(user, m); ok && got.Check() == nil {
				byMechanism[m] = got
			}
		}
		if got, ok := plainCredential(byMechanism); ok {
			c, known = got, true
		}
	}
	hg, _ := hashFor(c.Mechanism)
	cl, err := hg.NewClientUnprepped("", pass, "")
	if err != nil {
		return false
	}
	got := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations})
	return hmac.Equal(got.StoredKey, c.StoredKey) && known
}

func (s *plainSession) Done() bool        { return s.done }
func (s *plainSession) Principal() string { return principal(s.user) }
func (s *plainSession) Expiry() time.Time { return time.Time{} }
