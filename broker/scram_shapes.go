package broker

import (
	"reflect"
	"sync/atomic"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// shapes are the decoy shapes of one view of the SCRAM users, by
// mechanism (coordinator.State.ScramShape's answers, worked out once).
type shapes struct {
	// of is the ScramUsers map they were worked out from, held so that
	// its address cannot be reused by another map while cached.
	of map[string]*coordinator.ScramUser
	by map[string]shape
}

type shape struct {
	s  auth.Shape
	ok bool
}

func (s *shapes) get(mechanism string) (auth.Shape, bool) {
	sh := s.by[mechanism]
	return sh.s, sh.ok
}

// shapeCache holds the node's latest shapes.
type shapeCache = atomic.Pointer[shapes]

// scramShapes are st's decoy shapes, worked out again only when the
// users change: ScramShape reads every user, and an authentication of
// an unknown user that paid for it would take longer than a known
// user's, telling them apart. The metadata replaces ScramUsers with a
// new map on every change (coordinator/scram.go) and never writes one
// in place, so the same map means the same users.
func (n *Node) scramShapes(st *coordinator.State) *shapes {
	if c := n.shapes.Load(); c != nil && sameMap(c.of, st.ScramUsers) {
		return c
	}
	c := &shapes{of: st.ScramUsers, by: map[string]shape{}}
	for _, m := range []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512} {
		s, ok := st.ScramShape(m)
		c.by[m] = shape{s, ok}
	}
	n.shapes.Store(c)
	return c
}

// sameMap reports whether a and b are the same map (not merely equal).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
