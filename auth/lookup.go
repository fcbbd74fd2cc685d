package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

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
	// Shape returns the shape most real credentials of mechanism have
	// (Plain: the credentials PLAIN checks); ok is false when there are
	// none, and decoys then take DefaultShape's.
	Shape func(mechanism string) (s Shape, ok bool)
	// OAuth validates bearer tokens; nil refuses OAUTHBEARER.
	OAuth TokenValidator
}

// credential returns user's credential, or the decoy one and false.
func (l Lookup) credential(user, mechanism string) (Credential, bool) {
	// The decoy is derived for a known user too, so that the answer to
	// a known user costs what the answer to an unknown one does
	// (BenchmarkScram_WrongProof).
	decoy := l.decoy(user, mechanism)
	if l.Scram != nil {
		if c, ok := l.Scram(user, mechanism); ok && c.Check() == nil {
			return c, true
		}
	}
	return decoy, false
}

// Shape is what a credential shows before its proof: its mechanism (the
// hash PLAIN derives with), its salt's length and its iteration count.
// A decoy takes the shape most real credentials have, so that neither the
// salt a client is sent nor the time a check takes tells it from a user.
type Shape struct {
	Mechanism  string
	SaltLen    int
	Iterations int
}

// DefaultShape is a decoy's shape while no user has a credential of
// mechanism: kadm's and Kafka's tools' salt length and the fewest
// iterations Kafka allows.
func DefaultShape(mechanism string) Shape {
	if mechanism == Plain {
		mechanism = ScramSHA512
	}
	return Shape{Mechanism: mechanism, SaltLen: 24, Iterations: MinIterations}
}

// plainCredential is the credential PLAIN checks a user's password
// against: the first of ScramMechanisms the user has.
func plainCredential(byMechanism map[string]Credential) (Credential, bool) {
	for _, m := range ScramMechanisms() {
		if c, ok := byMechanism[m]; ok {
			return c, true
		}
	}
	return Credential{}, false
}

// CommonShape is the shape most of users' credentials of mechanism have
// (Plain: the ones PLAIN checks), ties going to the smaller salt and then
// the fewer iterations; each element of users is one user's credentials
// by mechanism. It is what Lookup.Shape answers.
func CommonShape(users []map[string]Credential, mechanism string) (Shape, bool) {
	count := map[Shape]int{}
	for _, u := range users {
		c, ok := u[mechanism]
		if mechanism == Plain {
			c, ok = plainCredential(u)
		}
		if ok {
			count[Shape{Mechanism: c.Mechanism, SaltLen: len(c.Salt), Iterations: c.Iterations}]++
		}
	}
	var best Shape
	n := 0
	for s, k := range count {
		if k > n || k == n && s.less(best) {
			best, n = s, k
		}
	}
	return best, n > 0
}

func (s Shape) less(o Shape) bool {
	if s.SaltLen != o.SaltLen {
		return s.SaltLen < o.SaltLen
	}
	if s.Iterations != o.Iterations {
		return s.Iterations < o.Iterations
	}
	return s.Mechanism < o.Mechanism
}

// decoyShape is the shape of mechanism's decoys.
func (l Lookup) decoyShape(mechanism string) Shape {
	if l.Shape != nil {
		if s, ok := l.Shape(mechanism); ok && s.valid() {
			return s
		}
	}
	return DefaultShape(mechanism)
}

func (s Shape) valid() bool {
	_, ok := hashFor(s.Mechanism)
	return ok && s.SaltLen > 0 && s.SaltLen <= maxSaltBytes &&
		s.Iterations >= MinIterations && s.Iterations <= MaxIterations
}

// decoy derives a credential no password matches, the same for the same
// name and key, of the shape real credentials of mechanism have (Plain:
// the one PLAIN checks): its keys are HMACs, not derived from any salted
// password.
func (l Lookup) decoy(user, mechanism string) Credential {
	shape := l.decoyShape(mechanism)
	hg, _ := hashFor(shape.Mechanism)
	sum := func(label string) []byte {
		m := hmac.New(sha256.New, l.DecoyKey)
		m.Write([]byte(label + "\x00" + shape.Mechanism + "\x00" + user))
		return m.Sum(nil)
	}
	expand := func(label string, n int) []byte {
		var b []byte
		for i := 0; len(b) < n; i++ {
			b = append(b, sum(fmt.Sprintf("%s%d", label, i))...)
		}
		return b[:n]
	}
	n := hg().Size()
	return Credential{Mechanism: shape.Mechanism, Salt: expand("salt", shape.SaltLen), Iterations: shape.Iterations,
		StoredKey: expand("stored", n), ServerKey: expand("server", n)}
}

func hmacSum(hg scram.HashGeneratorFcn, key []byte, msg string) []byte {
	m := hmac.New(hg, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
