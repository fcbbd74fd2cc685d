package auth

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// users is a Lookup over a fixed set of credentials.
func users(t testing.TB, mechs []string, pw map[string]string) Lookup {
	t.Helper()
	creds := map[[2]string]Credential{}
	for u, p := range pw {
		for _, m := range mechs {
			c, err := NewCredential(m, p, MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[[2]string{u, m}] = c
		}
	}
	return Lookup{DecoyKey: []byte("decoy key of the test cluster"), Scram: func(u, m string) (Credential, bool) {
		c, ok := creds[[2]string{u, m}]
		return c, ok
	}}
}

// TestScram_RFC7677Vector runs RFC 7677 §3's SCRAM-SHA-256 exchange
// byte for byte against a credential made from its password and salt.
func TestScram_RFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, err := NewCredentialWithSalt(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	l := Lookup{Scram: func(u, m string) (Credential, bool) { return c, u == "user" && m == ScramSHA256 }}
	s, err := newScramSession(ScramSHA256, l, func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" })
	if err != nil {
		t.Fatal(err)
	}
	steps := [][2]string{
		{"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
			"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"},
		{"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
			"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="},
	}
	for i, st := range steps {
		got, err := s.Step([]byte(st[0]))
		if err != nil || string(got) != st[1] {
			t.Fatalf("step %d: %q, %v; want %q", i, got, err, st[1])
		}
	}
	if !s.Done() || s.Principal() != "User:user" {
		t.Fatalf("done %v principal %q", s.Done(), s.Principal())
	}
	// The same exchange with one bit of the proof changed fails.
	s, _ = newScramSession(ScramSHA256, l, func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" })
	if _, err := s.Step([]byte(steps[0][0])); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(steps[1][0], "p=dHzb", "p=dHzc", 1)
	if _, err := s.Step([]byte(bad)); !errors.Is(err, ErrAuthFailed) || s.Done() {
		t.Fatalf("a wrong proof: %v, done %v", err, s.Done())
	}
}

// TestCredential_FromSaltedMatches: the credential KIP-554's salted
// password makes is the one the password makes.
func TestCredential_FromSaltedMatches(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	want, _ := NewCredentialWithSalt(ScramSHA256, "pencil", salt, 4096)
	// SaltedPassword of RFC 7677's vector, Hi("pencil", salt, 4096).
	sp, _ := base64.StdEncoding.DecodeString("xKSVEDI6tPlSysH6mUQZOeeOp01r6B3fcJbodRPcYV0=")
	got, err := FromSalted(ScramSHA256, salt, sp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.StoredKey) != string(want.StoredKey) || string(got.ServerKey) != string(want.ServerKey) {
		t.Fatalf("FromSalted %x/%x, want %x/%x", got.StoredKey, got.ServerKey, want.StoredKey, want.ServerKey)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"few iterations", func() error { _, err := FromSalted(ScramSHA256, salt, sp, 100); return err }()},
		{"many iterations", func() error { _, err := NewCredential(ScramSHA512, "x", MaxIterations+1); return err }()},
		{"short salted password", func() error { _, err := FromSalted(ScramSHA512, salt, sp, 4096); return err }()},
		{"unknown mechanism", func() error { _, err := NewCredential("SCRAM-SHA-1", "x", 4096); return err }()},
		{"empty password", func() error { _, err := NewCredential(ScramSHA256, "", 4096); return err }()},
		{"empty salt", func() error { _, err := FromSalted(ScramSHA256, nil, sp, 4096); return err }()},
	} {
		if !errors.Is(tc.err, ErrBadCredential) {
			t.Errorf("%s: %v, want ErrBadCredential", tc.name, tc.err)
		}
	}
}

// runClient drives a session with one of franz-go's client mechanisms.
func runClient(t *testing.T, s Session, m sasl.Mechanism) error {
	t.Helper()
	cs, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		resp, err := s.Step(msg)
		if err != nil {
			return err
		}
		var done bool
		done, msg, err = cs.Challenge(resp)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		if done {
			return nil
		}
	}
	return errors.New("exchange did not end")
}

// TestScram_FranzGoClient: franz-go's SCRAM client authenticates with
// the right password, for both hashes, and fails with a wrong one and as
// an unknown user, with the same error.
func TestScram_FranzGoClient(t *testing.T) {
	l := users(t, ScramMechanisms(), map[string]string{"alice": "s3cret"})
	for _, tc := range []struct {
		mech string
		as   func(kscram.Auth) sasl.Mechanism
	}{{ScramSHA256, kscram.Auth.AsSha256Mechanism}, {ScramSHA512, kscram.Auth.AsSha512Mechanism}} {
		for _, c := range []struct {
			user, pass string
			ok         bool
		}{{"alice", "s3cret", true}, {"alice", "wrong", false}, {"mallory", "s3cret", false}} {
			s, err := NewSession(tc.mech, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = runClient(t, s, tc.as(kscram.Auth{User: c.user, Pass: c.pass}))
			if c.ok && (err != nil || !s.Done() || s.Principal() != "User:alice") {
				t.Errorf("%s %s: %v, done %v, principal %q", tc.mech, c.user, err, s.Done(), s.Principal())
			}
			if !c.ok && (!errors.Is(err, ErrAuthFailed) || s.Done()) {
				t.Errorf("%s %s/%s: %v, done %v; want ErrAuthFailed", tc.mech, c.user, c.pass, err, s.Done())
			}
		}
	}
}

// TestScram_UnknownUserLooksKnown: an unknown user is answered with a
// salt and iteration count shaped like a real one, the same salt every
// time, so neither answers nor a second try tell that the user is
// missing; only the proof fails, as for a wrong password.
func TestScram_UnknownUserLooksKnown(t *testing.T) {
	l := users(t, []string{ScramSHA256}, map[string]string{"alice": "s3cret"})
	first := func(user string) string {
		s, _ := NewSession(ScramSHA256, l, nil)
		out, err := s.Step([]byte("n,,n=" + user + ",r=abcdefgh"))
		if err != nil {
			t.Fatalf("%s: first step: %v", user, err)
		}
		return string(out)
	}
	factors := func(msg string) (salt, iters string) {
		f := strings.Split(msg, ",")
		if len(f) != 3 {
			t.Fatalf("server-first %q", msg)
		}
		return f[1], f[2]
	}
	ks, ki := factors(first("alice"))
	us, ui := factors(first("mallory"))
	us2, _ := factors(first("mallory"))
	if len(ks) != len(us) || ki != ui {
		t.Errorf("unknown user's factors %s %s differ in shape from a known one's %s %s", us, ui, ks, ki)
	}
	if us != us2 {
		t.Errorf("unknown user's salt changed between tries: %s, %s", us, us2)
	}
	if other, _ := factors(first("trudy")); other == us {
		t.Errorf("two unknown users share salt %s", us)
	}
}

// TestPlain: the password is checked against the SCRAM credential;
// every failure is the same ErrAuthFailed.
func TestPlain(t *testing.T) {
	l := users(t, []string{ScramSHA256}, map[string]string{"alice": "s3cret"})
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{"\x00alice\x00s3cret", true},
		{"alice\x00alice\x00s3cret", true},
		{"\x00alice\x00wrong", false},
		{"\x00mallory\x00s3cret", false},
		{"bob\x00alice\x00s3cret", false},
		{"alice\x00s3cret", false},
		{"\x00\x00s3cret", false},
		{"\x00alice\x00", false},
		{"\x00alice\x00s3cret\x00", false},
	} {
		s, _ := NewSession(Plain, l, nil)
		_, err := s.Step([]byte(tc.token))
		if tc.ok != (err == nil && s.Done()) {
			t.Errorf("%q: %v, done %v, want ok %v", tc.token, err, s.Done(), tc.ok)
		}
		if !tc.ok && !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%q: %v, want ErrAuthFailed", tc.token, err)
		}
		if tc.ok && s.Principal() != "User:alice" {
			t.Errorf("%q: principal %q", tc.token, s.Principal())
		}
	}
}

// TestSession_EndsForGood: a failed session refuses every later token,
// even a right one; a finished one refuses more tokens; an oversized
// token is refused.
func TestSession_EndsForGood(t *testing.T) {
	l := users(t, []string{ScramSHA256}, map[string]string{"alice": "s3cret"})
	s, _ := NewSession(Plain, l, nil)
	if _, err := s.Step([]byte("\x00alice\x00wrong")); err == nil {
		t.Fatal("wrong password accepted")
	}
	if _, err := s.Step([]byte("\x00alice\x00s3cret")); !errors.Is(err, ErrAuthFailed) || s.Done() {
		t.Fatalf("retry in a failed session: %v, done %v", err, s.Done())
	}
	s, _ = NewSession(Plain, l, nil)
	if _, err := s.Step([]byte("\x00alice\x00s3cret")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step([]byte("\x00alice\x00s3cret")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("token after the end: %v", err)
	}
	s, _ = NewSession(ScramSHA256, l, nil)
	if _, err := s.Step(make([]byte, MaxTokenBytes+1)); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("oversized token: %v", err)
	}
	if _, err := NewSession("GSSAPI", l, nil); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("GSSAPI: %v", err)
	}
	if _, err := NewSession(OAuthBearer, l, nil); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("OAUTHBEARER without a validator: %v", err)
	}
}

func unsecuredToken(header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "."
}

// TestOAuthBearer_Unsecured: franz-go's OAUTHBEARER client with an
// unsecured JWS authenticates as its subject until exp; expired, signed,
// subjectless and mismatched tokens fail.
func TestOAuthBearer_Unsecured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := Lookup{OAuth: UnsecuredJWS{RequiredScope: "kafka"}}
	exp := now.Add(time.Hour).Unix()
	good := unsecuredToken(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka other"}`, exp))
	for _, tc := range []struct {
		name  string
		auth  oauth.Auth
		ok    bool
		until int64
	}{
		{"valid", oauth.Auth{Token: good}, true, exp},
		{"valid with its own authzid", oauth.Auth{Token: good, Zid: "alice"}, true, exp},
		{"another authzid", oauth.Auth{Token: good, Zid: "bob"}, false, 0},
		{"expired", oauth.Auth{Token: unsecuredToken(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, now.Add(-time.Second).Unix()))}, false, 0},
		{"signed", oauth.Auth{Token: unsecuredToken(`{"alg":"HS256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, exp)) + "sig"}, false, 0},
		{"alg HS256 unsigned", oauth.Auth{Token: unsecuredToken(`{"alg":"HS256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, exp))}, false, 0},
		{"no subject", oauth.Auth{Token: unsecuredToken(`{"alg":"none"}`, fmt.Sprintf(`{"exp":%d,"scope":"kafka"}`, exp))}, false, 0},
		{"no exp", oauth.Auth{Token: unsecuredToken(`{"alg":"none"}`, `{"sub":"alice","scope":"kafka"}`)}, false, 0},
		{"no scope", oauth.Auth{Token: unsecuredToken(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))}, false, 0},
		{"garbage", oauth.Auth{Token: "not-a-jws"}, false, 0},
	} {
		s, err := NewSession(OAuthBearer, l, func() time.Time { return now })
		if err != nil {
			t.Fatal(err)
		}
		err = runClient(t, s, tc.auth.AsMechanism())
		if tc.ok != (err == nil && s.Done()) {
			t.Errorf("%s: %v, done %v, want ok %v", tc.name, err, s.Done(), tc.ok)
			continue
		}
		if tc.ok && (s.Principal() != "User:alice" || s.Expiry().Unix() != tc.until) {
			t.Errorf("%s: principal %q expiry %v", tc.name, s.Principal(), s.Expiry())
		}
		if !tc.ok && !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: %v, want ErrAuthFailed", tc.name, err)
		}
	}
	for _, msg := range []string{"", "n,,", "n,,\x01auth=Bearer x\x01", "y,,\x01auth=Bearer x\x01\x01", "n,,\x01auth=Basic x\x01\x01",
		"n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01", "n,a=,\x01auth=Bearer x\x01\x01", "n,,\x01=x\x01\x01"} {
		if _, _, err := parseOAuthMessage([]byte(msg)); err == nil {
			t.Errorf("message %q parsed", msg)
		}
	}
}

// TestScram_LibrdkafkaNonce: librdkafka sends its own nonce before the
// whole server nonce in the client-final message; Kafka's server takes a
// nonce that ends with its own, and so does ours, with the proof over
// the message as sent. A nonce that does not end with the server's
// fails.
func TestScram_LibrdkafkaNonce(t *testing.T) {
	l := users(t, []string{ScramSHA256}, map[string]string{"alice": "s3cret"})
	for _, tc := range []struct {
		name string
		echo func(cnonce, full string) string
		ok   bool
	}{
		{"RFC 5802", func(_, full string) string { return full }, true},
		{"librdkafka", func(cnonce, full string) string { return cnonce + full }, true},
		{"another server nonce", func(cnonce, _ string) string { return cnonce + "XYZ" }, false},
	} {
		s, _ := NewSession(ScramSHA256, l, nil)
		c1bare := "n=alice,r=clientnonce42"
		s1, err := s.Step([]byte("n,," + c1bare))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Split(string(s1), ",")
		full := strings.TrimPrefix(f[0], "r=")
		salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(f[1], "s="))
		c, _ := l.Scram("alice", ScramSHA256)
		sp, err := pbkdf2.Key(sha256.New, "s3cret", salt, c.Iterations, sha256.Size)
		if err != nil {
			t.Fatal(err)
		}
		hg, _ := hashFor(ScramSHA256)
		clientKey := hmacSum(hg, sp, "Client Key")
		stored := sha256.Sum256(clientKey)
		wop := "c=biws,r=" + tc.echo("clientnonce42", full)
		sig := hmacSum(hg, stored[:], c1bare+","+string(s1)+","+wop)
		proof := make([]byte, len(sig))
		for i := range sig {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, err = s.Step([]byte(wop + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if tc.ok != (err == nil && s.Done()) {
			t.Errorf("%s: %v, done %v, want ok %v", tc.name, err, s.Done(), tc.ok)
		}
	}
}
