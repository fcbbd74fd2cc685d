package coordinator

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/auth"
)

func scramCred(t *testing.T, mech, pw string) auth.Credential {
	t.Helper()
	c, err := auth.NewCredential(mech, pw, auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func alterScram(m *Metadata, a *AlterScramCredentials) error {
	return m.Try(&Command{AlterScramCredentials: a}).Err
}

// TestScram_AlterAndLookup: upserts add and replace a mechanism's
// credential, deletions remove it, the last deletion removes the user;
// each refusal has Kafka's code and changes nothing; the state survives
// a snapshot.
func TestScram_AlterAndLookup(t *testing.T) {
	m := NewMetadata()
	c256, c512 := scramCred(t, auth.ScramSHA256, "a"), scramCred(t, auth.ScramSHA512, "a")
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "alice", Upserts: []auth.Credential{c256, c512}}})
	if got, ok := m.View().ScramCredential("alice", auth.ScramSHA512); !ok || string(got.StoredKey) != string(c512.StoredKey) {
		t.Fatalf("alice's SCRAM-SHA-512: %v %v", got, ok)
	}
	newer := scramCred(t, auth.ScramSHA256, "b")
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "alice", Upserts: []auth.Credential{newer}, Deletions: []string{auth.ScramSHA512}}})
	v := m.View()
	if got, _ := v.ScramCredential("alice", auth.ScramSHA256); string(got.StoredKey) != string(newer.StoredKey) {
		t.Fatal("the upsert did not replace the credential")
	}
	if _, ok := v.ScramCredential("alice", auth.ScramSHA512); ok {
		t.Fatal("the deletion left the credential")
	}
	bad := c256
	bad.Iterations = 10
	for _, tc := range []struct {
		name string
		a    *AlterScramCredentials
		code *kerr.Error
	}{
		{"empty user", &AlterScramCredentials{Upserts: []auth.Credential{c256}}, kerr.UnacceptableCredential},
		{"nothing to do", &AlterScramCredentials{User: "bob"}, kerr.InvalidRequest},
		{"few iterations", &AlterScramCredentials{User: "bob", Upserts: []auth.Credential{bad}}, kerr.UnacceptableCredential},
		{"twice", &AlterScramCredentials{User: "bob", Upserts: []auth.Credential{c256}, Deletions: []string{auth.ScramSHA256}}, kerr.DuplicateResource},
		{"unknown mechanism", &AlterScramCredentials{User: "alice", Deletions: []string{"SCRAM-SHA-1"}}, kerr.UnsupportedSaslMechanism},
		{"delete what is not there", &AlterScramCredentials{User: "alice", Deletions: []string{auth.ScramSHA512}}, kerr.ResourceNotFound},
	} {
		var ce *Error
		if err := alterScram(m, tc.a); !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code.Message)
		}
	}
	if m.View().Index != v.Index {
		t.Fatal("a refused change changed the state")
	}
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "alice", Deletions: []string{auth.ScramSHA256}}})
	if _, ok := m.View().ScramUsers["alice"]; ok {
		t.Fatal("a user without credentials is kept")
	}
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "carol", Upserts: []auth.Credential{c512}}})
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := NewMetadata()
	if err := r.Restore(&raftpb.Snapshot{Data: snap}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.View().ScramCredential("carol", auth.ScramSHA512); !ok || string(got.ServerKey) != string(c512.ServerKey) {
		t.Fatalf("carol after a snapshot: %v %v", got, ok)
	}
}

// TestScram_DecoyKeyAndShape: the first change that applies with a decoy
// key makes it the cluster's, later ones (and refused ones) leave it, and
// it survives a snapshot; ScramShape follows the users' credentials.
func TestScram_DecoyKeyAndShape(t *testing.T) {
	m := NewMetadata()
	c := scramCred(t, auth.ScramSHA256, "a")
	refused := &AlterScramCredentials{User: "alice", Deletions: []string{auth.ScramSHA256}, DecoyKey: NewDecoyKey()}
	if err := alterScram(m, refused); err == nil {
		t.Fatal("deleting a missing credential applied")
	}
	if len(m.View().ScramDecoyKey) != 0 {
		t.Fatal("a refused change set the decoy key")
	}
	first := NewDecoyKey()
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "alice", Upserts: []auth.Credential{c}, DecoyKey: first}})
	applyChecked(t, m, &Command{AlterScramCredentials: &AlterScramCredentials{User: "bob", Upserts: []auth.Credential{c}, DecoyKey: NewDecoyKey()}})
	if got := m.View().ScramDecoyKey; string(got) != string(first) {
		t.Fatalf("decoy key %x, want the first one %x", got, first)
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := NewMetadata()
	if err := r.Restore(&raftpb.Snapshot{Data: snap}); err != nil {
		t.Fatal(err)
	}
	if got := r.View().ScramDecoyKey; string(got) != string(first) {
		t.Fatalf("decoy key after a snapshot %x, want %x", got, first)
	}
	want := auth.Shape{Mechanism: auth.ScramSHA256, SaltLen: len(c.Salt), Iterations: c.Iterations}
	for _, mech := range []string{auth.ScramSHA256, auth.Plain} {
		if got, ok := r.View().ScramShape(mech); !ok || got != want {
			t.Errorf("%s shape %+v %v, want %+v", mech, got, ok, want)
		}
	}
	if _, ok := r.View().ScramShape(auth.ScramSHA512); ok {
		t.Error("a SCRAM-SHA-512 shape without such credentials")
	}
}
