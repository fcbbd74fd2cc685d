package auth

import (
	"fmt"
	"time"
)

// Session is one authentication in progress.
type Session interface {
	// Step takes the client's next token and returns the server's
	// answer (possibly empty). Any error is ErrAuthFailed or wraps it,
	// and ends the session.
	Step(token []byte) ([]byte, error)
	// Done reports whether the client authenticated.
	Done() bool
	// Principal is "User:<name>" once Done.
	Principal() string
	// Expiry is when the credential the client showed stops being
	// valid (a bearer token's exp), or zero when it does not expire;
	// with KIP-368 the connection must authenticate again by then.
	Expiry() time.Time
}

// Mechanisms lists the mechanisms NewSession serves with l: OAUTHBEARER
// only when l has a validator.
func Mechanisms(l Lookup) []string {
	m := []string{Plain, ScramSHA256, ScramSHA512}
	if l.OAuth != nil {
		m = append(m, OAuthBearer)
	}
	return m
}

// NewSession starts an authentication with mechanism.
func NewSession(mechanism string, l Lookup, now func() time.Time) (Session, error) {
	if now == nil {
		now = time.Now
	}
	switch mechanism {
	case Plain:
		return &plainSession{l: l}, nil
	case ScramSHA256, ScramSHA512:
		return newScramSession(mechanism, l, nil)
	case OAuthBearer:
		if l.OAuth != nil {
			return &oauthSession{v: l.OAuth, now: now}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
}

// principal is Kafka's form of a user principal.
func principal(user string) string { return "User:" + user }

// failed is the state every session enters on its first error.
type failed struct{ dead bool }

func (f *failed) fail(err error) error {
	f.dead = true
	if err == nil {
		return ErrAuthFailed
	}
	return fmt.Errorf("%w (%v)", ErrAuthFailed, err)
}

// check refuses a step of a dead or finished session and an oversized
// token.
func (f *failed) check(done bool, token []byte) error {
	switch {
	case f.dead:
		return ErrAuthFailed
	case done:
		return f.fail(fmt.Errorf("token after the authentication ended"))
	case len(token) > MaxTokenBytes:
		return f.fail(fmt.Errorf("token of %d bytes, over %d", len(token), MaxTokenBytes))
	}
	return nil
}
