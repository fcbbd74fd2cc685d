package auth

import (
	"bytes"
	"testing"
)

// shapedUsers is a Lookup whose users' credentials have salts of saltLen
// bytes and iters iterations, with Shape answered by CommonShape, as the
// metadata state answers it.
func shapedUsers(t *testing.T, mech string, saltLen, iters int, names ...string) Lookup {
	t.Helper()
	byUser := map[string]map[string]Credential{}
	var all []map[string]Credential
	for _, u := range names {
		c, err := NewCredentialWithSalt(mech, "pw-"+u, bytes.Repeat([]byte(u[:1]), saltLen), iters)
		if err != nil {
			t.Fatal(err)
		}
		byUser[u] = map[string]Credential{mech: c}
		all = append(all, byUser[u])
	}
	return Lookup{
		DecoyKey: []byte("k"),
		Scram: func(u, m string) (Credential, bool) {
			c, ok := byUser[u][m]
			return c, ok
		},
		Shape: func(m string) (Shape, bool) { return CommonShape(all, m) },
	}
}

// TestDecoy_TakesTheUsersShape: with users whose salts and iteration
// counts differ from the defaults, an unknown user's decoy has theirs, for
// SCRAM (salt length and iterations the client sees) and for PLAIN (the
// hash and iterations the check costs). Without Shape it would not.
func TestDecoy_TakesTheUsersShape(t *testing.T) {
	l := shapedUsers(t, ScramSHA256, 40, 8192, "alice", "bob")
	for _, mech := range []string{ScramSHA256, Plain} {
		d := l.decoy("mallory", mech)
		if d.Mechanism != ScramSHA256 || len(d.Salt) != 40 || d.Iterations != 8192 {
			t.Errorf("%s decoy: %s, salt %d bytes, %d iterations; want the users' SCRAM-SHA-256, 40, 8192", mech, d.Mechanism, len(d.Salt), d.Iterations)
		}
		if err := d.Check(); err != nil {
			t.Errorf("%s decoy: %v", mech, err)
		}
	}
	l.Shape = nil
	if d := l.decoy("mallory", ScramSHA256); len(d.Salt) == 40 || d.Iterations == 8192 {
		t.Errorf("without Shape the decoy still took the users' shape: %d, %d", len(d.Salt), d.Iterations)
	}
}

func TestCommonShape(t *testing.T) {
	c := func(m string, salt, iters int) Credential {
		cr, err := NewCredentialWithSalt(m, "p", make([]byte, salt), iters)
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	users := []map[string]Credential{
		{ScramSHA256: c(ScramSHA256, 24, 4096), ScramSHA512: c(ScramSHA512, 32, 8192)},
		{ScramSHA512: c(ScramSHA512, 32, 8192)},
		{ScramSHA256: c(ScramSHA256, 16, 4096)},
	}
	ties := []map[string]Credential{
		{ScramSHA256: c(ScramSHA256, 24, 4096)},
		{ScramSHA256: c(ScramSHA256, 16, 8192)},
		{ScramSHA256: c(ScramSHA256, 16, 4096)},
	}
	for _, tc := range []struct {
		users []map[string]Credential
		mech  string
		want  Shape
	}{
		{users, ScramSHA512, Shape{ScramSHA512, 32, 8192}},
		// Two SHA-256 credentials, one each: the smaller salt.
		{users, ScramSHA256, Shape{ScramSHA256, 16, 4096}},
		// PLAIN checks the first of ScramMechanisms a user has.
		{users, Plain, Shape{ScramSHA512, 32, 8192}},
		// A tie goes to the smaller salt, then the fewer iterations.
		{ties, ScramSHA256, Shape{ScramSHA256, 16, 4096}},
	} {
		got, ok := CommonShape(tc.users, tc.mech)
		if got != tc.want || !ok {
			t.Errorf("%s: %+v %v, want %+v", tc.mech, got, ok, tc.want)
		}
	}
	if _, ok := CommonShape(nil, ScramSHA256); ok {
		t.Error("a shape without users")
	}
}
