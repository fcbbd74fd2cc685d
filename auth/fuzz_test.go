package auth

import (
	"testing"
	"time"
)

// FuzzSessions feeds arbitrary tokens to every mechanism: nothing
// panics, and no token authenticates without the password (OAUTHBEARER's
// unsecured tokens can be minted by anyone, so for it only a well-formed
// principal is required).
func FuzzSessions(f *testing.F) {
	l := users(f, ScramMechanisms(), map[string]string{"alice": "an unguessable password 7f3a"})
	l.OAuth = UnsecuredJWS{}
	f.Add(uint8(0), []byte("\x00alice\x00x"), []byte(nil))
	f.Add(uint8(1), []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), []byte("n,a=alice,n=alice,r=abc"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(uint8(3), []byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjo5OTk5OTk5OTk5fQ.\x01\x01"), []byte(nil))
	mechs := []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}
	f.Fuzz(func(t *testing.T, m uint8, first, second []byte) {
		mech := mechs[int(m)%len(mechs)]
		s, err := NewSession(mech, l, func() time.Time { return time.Unix(1_800_000_000, 0) })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Step(first); err == nil && !s.Done() {
			_, _ = s.Step(second)
		}
		if !s.Done() {
			return
		}
		if mech != OAuthBearer {
			t.Fatalf("%s authenticated %q without the password: %q, %q", mech, s.Principal(), first, second)
		}
		if s.Principal() == "User:" {
			t.Fatalf("empty principal from %q", first)
		}
	})
}
