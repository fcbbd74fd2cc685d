package auth

import (
	"encoding/base64"
	"strings"
	"testing"
)

// BenchmarkScram_WrongProof is the server's whole SCRAM-SHA-256 exchange
// for a client with a wrong proof, for a known user and an unknown one
// (answered by a decoy): the two should cost the same, so that timing
// the answers does not tell which users exist.
func BenchmarkScram_WrongProof(b *testing.B) {
	l := users(b, []string{ScramSHA256}, map[string]string{"alice": "s3cret"})
	proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, user := range []string{"alice", "mallory"} {
		b.Run(user, func(b *testing.B) {
			for b.Loop() {
				s, _ := NewSession(ScramSHA256, l, nil)
				out, err := s.Step([]byte("n,,n=" + user + ",r=abcdefgh"))
				if err != nil {
					b.Fatal(err)
				}
				nonce, _, _ := strings.Cut(strings.TrimPrefix(string(out), "r="), ",")
				if _, err := s.Step([]byte("c=biws,r=" + nonce + ",p=" + proof)); err == nil {
					b.Fatal("a wrong proof passed")
				}
			}
		})
	}
}
