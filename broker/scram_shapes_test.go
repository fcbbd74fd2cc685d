package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// TestNode_DecoyShapesFollowUsers: an unknown user's decoy takes the
// users' shape from shapes worked out once per view of the users (the
// same view gives the same shapes), and again when the users change.
func TestNode_DecoyShapesFollowUsers(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[1]
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shapeOf := func() (auth.Shape, bool) { return n.saslConfig().Lookup().Shape(auth.ScramSHA256) }
	if _, ok := shapeOf(); ok {
		t.Fatal("a shape without users")
	}
	for _, iters := range []int32{8192, 16384} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: iters, Password: "pw"}})
		if err != nil || res.Error() != nil {
			t.Fatalf("upsert: %v %v", err, res.Error())
		}
		eventually(t, "the decoys take alice's iterations", func() bool {
			s, ok := shapeOf()
			return ok && s.Iterations == int(iters)
		})
		if st := n.meta.View(); !sameMap(n.scramShapes(st), n.scramShapes(st)) {
			t.Error("one view of the users worked its shapes out twice")
		}
	}
}

// BenchmarkDecoyShape: the shape an unknown user's decoy takes among
// 10,000 users, worked out per authentication (before) and from the
// node's shapes (now).
func BenchmarkDecoyShape(b *testing.B) {
	st := &coordinator.State{ScramUsers: map[string]*coordinator.ScramUser{}}
	cred, err := auth.NewCredential(auth.ScramSHA256, "pw", auth.MinIterations)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		st.ScramUsers[fmt.Sprintf("user-%d", i)] = &coordinator.ScramUser{Credentials: map[string]auth.Credential{auth.ScramSHA256: cred}}
	}
	b.Run("per-authentication", func(b *testing.B) {
		for b.Loop() {
			if _, ok := st.ScramShape(auth.ScramSHA256); !ok {
				b.Fatal("no shape")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		n := &Node{}
		for b.Loop() {
			if _, ok := n.scramShapes(st).get(auth.ScramSHA256); !ok {
				b.Fatal("no shape")
			}
		}
	})
}
