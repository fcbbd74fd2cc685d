package coordinator

import (
	"crypto/rand"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/auth"
)

// ScramUser is one user's SCRAM credentials by mechanism (KIP-554): salts,
// iteration counts and derived keys, never passwords. A *ScramUser
// reachable from a published State is never modified; changes replace it.
type ScramUser struct {
	Credentials map[string]auth.Credential `json:"credentials"`
}

// AlterScramCredentials changes one user's SCRAM credentials, all or
// nothing: Upserts set a mechanism's credential (replacing any), and
// Deletions remove mechanisms'. A user left with none is removed.
type AlterScramCredentials struct {
	User      string            `json:"user"`
	Upserts   []auth.Credential `json:"upserts,omitempty"`
	Deletions []string          `json:"deletions,omitempty"`
	// DecoyKey is a random key the proposer drew (NewDecoyKey): the
	// first command that applies with one makes it the cluster's
	// State.ScramDecoyKey; later ones leave that alone.
	DecoyKey []byte `json:"decoy_key,omitempty"`
}

// decoyKeyBytes is the length of a SCRAM decoy key.
const decoyKeyBytes = 32

// NewDecoyKey draws a key for AlterScramCredentials.DecoyKey.
func NewDecoyKey() []byte {
	b := make([]byte, decoyKeyBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// maxUserNameBytes bounds a SCRAM user name.
const maxUserNameBytes = 255

// ScramCredential returns user's credential for mechanism.
func (s *State) ScramCredential(user, mechanism string) (auth.Credential, bool) {
	u := s.ScramUsers[user]
	if u == nil {
		return auth.Credential{}, false
	}
	c, ok := u.Credentials[mechanism]
	return c, ok
}

// CheckScramAlter refuses an AlterScramCredentials that apply would
// refuse whatever the state: proposers check first, as Kafka's broker
// does before it forwards to the controller.
func CheckScramAlter(a *AlterScramCredentials) error {
	switch {
	case a.User == "":
		return cmdErr(kerr.UnacceptableCredential, "empty user name")
	case len(a.User) > maxUserNameBytes:
		return cmdErr(kerr.UnacceptableCredential, "user name of %d bytes, over %d", len(a.User), maxUserNameBytes)
	case len(a.Upserts)+len(a.Deletions) == 0:
		return cmdErr(kerr.InvalidRequest, "no credential to change for user %s", a.User)
	}
	seen := map[string]bool{}
	for _, c := range a.Upserts {
		if err := c.Check(); err != nil {
			return cmdErr(kerr.UnacceptableCredential, "user %s: %v", a.User, err)
		}
		if seen[c.Mechanism] {
			return cmdErr(kerr.DuplicateResource, "user %s: %s named twice", a.User, c.Mechanism)
		}
		seen[c.Mechanism] = true
	}
	for _, m := range a.Deletions {
		if !slices.Contains(auth.ScramMechanisms(), m) {
			return cmdErr(kerr.UnsupportedSaslMechanism, "user %s: unknown SCRAM mechanism %q", a.User, m)
		}
		if seen[m] {
			return cmdErr(kerr.DuplicateResource, "user %s: %s named twice", a.User, m)
		}
		seen[m] = true
	}
	return nil
}

func (s *State) alterScramCredentials(a *AlterScramCredentials) Result {
	if err := CheckScramAlter(a); err != nil {
		return Result{Err: err}
	}
	creds := map[string]auth.Credential{}
	if u := s.ScramUsers[a.User]; u != nil {
		maps.Copy(creds, u.Credentials)
	}
	for _, m := range a.Deletions {
		if _, ok := creds[m]; !ok {
			return Result{Err: cmdErr(kerr.ResourceNotFound, "user %s has no %s credential to delete", a.User, m)}
		}
		delete(creds, m)
	}
	for _, c := range a.Upserts {
		creds[c.Mechanism] = c
	}
	users := maps.Clone(s.ScramUsers)
	if users == nil {
		users = map[string]*ScramUser{}
	}
	if len(creds) == 0 {
		delete(users, a.User)
	} else {
		users[a.User] = &ScramUser{Credentials: creds}
	}
	s.ScramUsers = users
	if len(s.ScramDecoyKey) == 0 && len(a.DecoyKey) == decoyKeyBytes {
		s.ScramDecoyKey = a.DecoyKey
	}
	return Result{}
}

// ScramShape is the shape most users' credentials of mechanism have
// (auth.Plain: the ones PLAIN checks), for their decoys (auth.Lookup.Shape).
// It reads every user: the broker works it out once per change of the
// users (broker/scram_shapes.go), since an authentication that paid for
// it per unknown user would take longer than a known user's.
func (s *State) ScramShape(mechanism string) (auth.Shape, bool) {
	users := make([]map[string]auth.Credential, 0, len(s.ScramUsers))
	for _, u := range s.ScramUsers {
		users = append(users, u.Credentials)
	}
	return auth.CommonShape(users, mechanism)
}

// checkScramUsers: every user named, with at least one well-formed
// credential filed under its own mechanism.
func (s *State) checkScramUsers() error {
	for name, u := range s.ScramUsers {
		if name == "" || u == nil || len(u.Credentials) == 0 {
			return cmdErr(kerr.InvalidRequest, "scram user %q: empty", name)
		}
		for m, c := range u.Credentials {
			if err := c.Check(); err != nil || c.Mechanism != m {
				return cmdErr(kerr.InvalidRequest, "scram user %q %s: %v", name, m, err)
			}
		}
	}
	return nil
}
