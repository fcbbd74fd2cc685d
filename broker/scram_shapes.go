package broker

import (
	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// shapes are the decoy shapes of one view of the SCRAM users, by
// mechanism (coordinator.State.ScramShape's answers, worked out once).
type shapes map[string]shape

type shape struct {
	s  auth.Shape
	ok bool
}

func (s shapes) get(mechanism string) (auth.Shape, bool) {
	sh := s[mechanism]
	return sh.s, sh.ok
}

// scramShapes are st's decoy shapes, worked out again only when the
// users change (derived.go): ScramShape reads every user, and an
// authentication of an unknown user that paid for it would take longer
// than a known user's, telling them apart.
func (n *Node) scramShapes(st *coordinator.State) shapes {
	return n.shapes.get(st.ScramUsers, sameMap, func(map[string]*coordinator.ScramUser) shapes {
		by := shapes{}
		for _, m := range []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512} {
			s, ok := st.ScramShape(m)
			by[m] = shape{s, ok}
		}
		return by
	})
}
