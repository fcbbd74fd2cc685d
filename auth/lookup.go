package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"

	"github.com/xdg-go/scram"
)

// MaxTokenBytes bounds one client token. SCRAM and PLAIN tokens are a few
// hundred bytes and an OAuth bearer token a few KiB; Kafka's own bound
// (sasl.server.max.receive.size) is 512 KiB, which we keep.
const MaxTokenBytes = 512 << 10

// ErrAuthFailed is the one failure a client is shown, whatever went
// wrong: unknown user, wrong password, bad proof, malformed token.
var ErrAuthFailed = errors.New("auth: authentication failed: invalid credentials")

// ErrUnsupportedMechanism is returned by NewSession for a mechanism that
// is not served.
var ErrUnsupportedMechanism = errors.New("auth: unsupported SASL mechanism")

// Lookup gives sessions the credentials they check.
type Lookup struct {
	// Scram returns user's credential for a SCRAM mechanism; ok is false
	// when there is none.
	Scram func(user, mechanism string) (c Credential, ok bool)
	// DecoyKey seeds the decoy credentials of unknown users. It must be
	// secret and the same on every node of a cluster, or comparing two
	// nodes' salts for a name would tell whether the user exists.
	DecoyKey []byte
	// OAuth validates bearer tokens; nil refuses OAUTHBEARER.
	OAuth TokenValidator
}

// credential returns user's credential, or the decoy one and false.
func (l Lookup) credential(user, mechanism string) (Credential, bool) {
	if l.Scram != nil {
		if c, ok := l.Scram(user, mechanism); ok && c.Check() == nil {
			return c, true
		}
	}
	return l.decoy(user, mechanism), false
}

// decoy derives a credential no password matches, the same for the same
// name and key: its keys are HMACs, not derived from any salted password.
func (l Lookup) decoy(user, mechanism string) Credential {
	hg, _ := hashFor(mechanism)
	sum := func(label string) []byte {
		m := hmac.New(sha256.New, l.DecoyKey)
		m.Write([]byte(label + "\x00" + mechanism + "\x00" + user))
		return m.Sum(nil)
	}
	n := hg().Size()
	expand := func(label string) []byte {
		b := append(sum(label+"1"), sum(label+"2")...)
		return b[:n]
	}
	return Credential{Mechanism: mechanism, Salt: sum("salt"), Iterations: MinIterations,
		StoredKey: expand("stored"), ServerKey: expand("server")}
}

func hmacSum(hg scram.HashGeneratorFcn, key []byte, msg string) []byte {
	m := hmac.New(hg, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
