package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"
)

// The SASL mechanisms raftq serves, as Kafka names them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Iteration bounds of a SCRAM credential, as Kafka's
// (ScramMechanism.minIterations, maxIterations).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// maxSaltBytes bounds a credential's salt: Kafka's tools make 24 to 32
// bytes.
const maxSaltBytes = 1024

// ErrBadCredential wraps every refusal of a credential to create.
var ErrBadCredential = errors.New("auth: bad credential")

// Credential is the server's stored form of one user's password for one
// SCRAM mechanism (RFC 5802 §3): never the password itself.
type Credential struct {
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// ScramMechanisms lists the SCRAM mechanisms, strongest first.
func ScramMechanisms() []string { return []string{ScramSHA512, ScramSHA256} }

// hashFor returns the hash of a SCRAM mechanism.
func hashFor(mechanism string) (scram.HashGeneratorFcn, bool) {
	switch mechanism {
	case ScramSHA256:
		return func() hash.Hash { return sha256.New() }, true
	case ScramSHA512:
		return func() hash.Hash { return sha512.New() }, true
	}
	return nil, false
}

// NewCredential salts and iterates password for mechanism with a random
// 32-byte salt. Kafka clients send passwords unprepared, so the password
// is used as given (no SASLprep), as Kafka's ScramFormatter does.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, DefaultShape(mechanism).SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, fmt.Errorf("auth: salt: %w", err)
	}
	return NewCredentialWithSalt(mechanism, password, salt, iterations)
}

// NewCredentialWithSalt is NewCredential with a given salt (the SCRAM
// test vectors; AlterUserScramCredentials, whose clients salt
// themselves, sends salted passwords, not passwords, see FromSalted).
func NewCredentialWithSalt(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	hg, ok := hashFor(mechanism)
	if err := checkFactors(mechanism, ok, salt, iterations); err != nil {
		return Credential{}, err
	}
	if password == "" {
		return Credential{}, fmt.Errorf("%w: empty password", ErrBadCredential)
	}
	c, err := hg.NewClientUnprepped("", password, "")
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %w", ErrBadCredential, err)
	}
	sc := c.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	return Credential{Mechanism: mechanism, Salt: salt, Iterations: iterations, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// FromSalted builds a credential from a salted password, Hi(password,
// salt, iterations), which is what AlterUserScramCredentials upserts
// carry (KIP-554): the broker never sees the password.
func FromSalted(mechanism string, salt, saltedPassword []byte, iterations int) (Credential, error) {
	hg, ok := hashFor(mechanism)
	if err := checkFactors(mechanism, ok, salt, iterations); err != nil {
		return Credential{}, err
	}
	if len(saltedPassword) != hg().Size() {
		return Credential{}, fmt.Errorf("%w: salted password of %d bytes, %s needs %d", ErrBadCredential, len(saltedPassword), mechanism, hg().Size())
	}
	clientKey := hmacSum(hg, saltedPassword, "Client Key")
	h := hg()
	h.Write(clientKey)
	return Credential{Mechanism: mechanism, Salt: salt, Iterations: iterations,
		StoredKey: h.Sum(nil), ServerKey: hmacSum(hg, saltedPassword, "Server Key")}, nil
}

func checkFactors(mechanism string, known bool, salt []byte, iterations int) error {
	switch {
	case !known:
		return fmt.Errorf("%w: unknown SCRAM mechanism %q", ErrBadCredential, mechanism)
	case iterations < MinIterations || iterations > MaxIterations:
		return fmt.Errorf("%w: %d iterations, want %d to %d", ErrBadCredential, iterations, MinIterations, MaxIterations)
	case len(salt) == 0 || len(salt) > maxSaltBytes:
		return fmt.Errorf("%w: salt of %d bytes, want 1 to %d", ErrBadCredential, len(salt), maxSaltBytes)
	}
	return nil
}

// Check reports whether c is well formed for its mechanism (a credential
// read back from the metadata state).
func (c Credential) Check() error {
	hg, ok := hashFor(c.Mechanism)
	if err := checkFactors(c.Mechanism, ok, c.Salt, c.Iterations); err != nil {
		return err
	}
	if n := hg().Size(); len(c.StoredKey) != n || len(c.ServerKey) != n {
		return fmt.Errorf("%w: %s keys of %d and %d bytes, want %d", ErrBadCredential, c.Mechanism, len(c.StoredKey), len(c.ServerKey), n)
	}
	return nil
}
