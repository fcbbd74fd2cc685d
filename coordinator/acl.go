package coordinator

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/auth"
)

// CreateACLs adds ACL bindings, all or none. An ACL already held is kept
// once, as Kafka makes creation idempotent.
type CreateACLs struct {
	ACLs []auth.ACL `json:"acls"`
}

// DeleteACLs removes every ACL that any of Filters matches. The Result's
// ACLs list, per filter in order, the ACLs it matched (an ACL two filters
// match is listed under both, as Kafka does).
type DeleteACLs struct {
	Filters []auth.ACLFilter `json:"filters"`
}

// maxACLsPerCommand bounds one command, so that one request cannot make
// an entry of unbounded size.
const maxACLsPerCommand = 10000

// CheckACL refuses an ACL that apply would refuse whatever the state,
// with Kafka's INVALID_REQUEST and the reason.
func CheckACL(a auth.ACL) error {
	if err := a.Check(); err != nil {
		return aclErr(err)
	}
	return nil
}

// CheckACLFilter refuses a filter with an unknown field.
func CheckACLFilter(f auth.ACLFilter) error {
	if err := f.Check(); err != nil {
		return aclErr(err)
	}
	return nil
}

func aclErr(err error) *Error {
	msg := err.Error()
	if errors.Is(err, auth.ErrInvalidACL) {
		msg = msg[len(auth.ErrInvalidACL.Error())+2:]
	}
	return cmdErr(kerr.InvalidRequest, "%s", msg)
}

func (s *State) createACLs(c *CreateACLs) Result {
	if len(c.ACLs) == 0 || len(c.ACLs) > maxACLsPerCommand {
		return Result{Err: cmdErr(kerr.InvalidRequest, "%d acls in one command: want 1 to %d", len(c.ACLs), maxACLsPerCommand)}
	}
	// A new slice, never s.ACLs written in place: the broker indexes a
	// view's ACLs once per slice (broker/authorize.go).
	acls := slices.Clone(s.ACLs)
	held := make(map[auth.ACL]bool, len(acls)+len(c.ACLs))
	for _, a := range acls {
		held[a] = true
	}
	for _, a := range c.ACLs {
		if err := CheckACL(a); err != nil {
			return Result{Err: err}
		}
		if !held[a] {
			held[a] = true
			acls = append(acls, a)
		}
	}
	s.ACLs = acls
	return Result{}
}

func (s *State) deleteACLs(c *DeleteACLs) Result {
	if len(c.Filters) == 0 || len(c.Filters) > maxACLsPerCommand {
		return Result{Err: cmdErr(kerr.InvalidRequest, "%d filters in one command: want 1 to %d", len(c.Filters), maxACLsPerCommand)}
	}
	matched := make([][]auth.ACL, len(c.Filters))
	for i, f := range c.Filters {
		if err := CheckACLFilter(f); err != nil {
			return Result{Err: err}
		}
		matched[i] = f.Select(s.ACLs)
	}
	s.ACLs = slices.DeleteFunc(slices.Clone(s.ACLs), func(a auth.ACL) bool {
		return slices.ContainsFunc(c.Filters, func(f auth.ACLFilter) bool { return f.Matches(a) })
	})
	if len(s.ACLs) == 0 {
		s.ACLs = nil
	}
	return Result{ACLs: matched}
}

// checkACLs: every ACL well formed and held once.
func (s *State) checkACLs() error {
	seen := make(map[auth.ACL]bool, len(s.ACLs))
	for _, a := range s.ACLs {
		if err := a.Check(); err != nil {
			return cmdErr(kerr.InvalidRequest, "acl %s: %v", a, err)
		}
		if seen[a] {
			return cmdErr(kerr.InvalidRequest, "acl %s held twice", a)
		}
		seen[a] = true
	}
	return nil
}
