package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// TestScramUsers_AdminRoundTrip: kadm upserts SCRAM users through one
// node; every node's metadata then holds credentials that authenticate
// the password (and only it), Describe lists mechanisms and iterations,
// deletions remove them, and bad requests get Kafka's codes.
func TestScramUsers_AdminRoundTrip(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Password: "bob-pw"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("upsert: %v %v", err, res.Error())
	}
	eventually(t, "every node holds the users", func() bool {
		for _, n := range c.nodes {
			if _, ok := n.meta.View().ScramCredential("bob", auth.ScramSHA512); !ok {
				return false
			}
		}
		return true
	})
	for id, n := range c.nodes {
		v := n.meta.View()
		l := auth.Lookup{DecoyKey: []byte("k"), Scram: v.ScramCredential}
		for _, pw := range []string{"alice-pw", "wrong"} {
			s, _ := auth.NewSession(auth.Plain, l, nil)
			_, err := s.Step([]byte("\x00alice\x00" + pw))
			if (pw == "alice-pw") != (err == nil && s.Done()) {
				t.Errorf("node %d: PLAIN alice/%s against the stored credential: %v", id, pw, err)
			}
		}
	}
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || desc.Error() != nil {
		t.Fatalf("describe: %v %v", err, desc.Error())
	}
	a := desc["alice"]
	if len(a.CredInfos) != 2 || a.CredInfos[0].Mechanism != kadm.ScramSha512 || a.CredInfos[0].Iterations != 8192 {
		t.Errorf("alice described as %+v", a.CredInfos)
	}
	desc, _ = adm.DescribeUserSCRAMs(ctx, "carol")
	if !errors.Is(desc["carol"].Err, kerr.ResourceNotFound) {
		t.Errorf("describe an unknown user: %v", desc["carol"].Err)
	}
	res, _ = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}, {User: "alice", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Salt: []byte("s"), SaltedPassword: []byte("short"), Iterations: 4096}})
	for user, want := range map[string]*kerr.Error{"carol": kerr.ResourceNotFound, "alice": nil, "dave": kerr.UnacceptableCredential} {
		if got := res[user].Err; (want == nil && got != nil) || (want != nil && !errors.Is(got, want)) {
			t.Errorf("alter %s: %v, want %v", user, got, want)
		}
	}
	// Any node answers Describe from its own view, which may lag the
	// node that proposed.
	eventually(t, "alice described with SCRAM-SHA-512 alone", func() bool {
		desc, _ = adm.DescribeUserSCRAMs(ctx, "alice")
		infos := desc["alice"].CredInfos
		return len(infos) == 1 && infos[0].Mechanism == kadm.ScramSha512
	})
}

// TestScramUsers_RefusedBesideAnOlderBinary: while a registered broker
// runs a binary that does not apply AlterScramCredentials, a change is
// answered UNSUPPORTED_VERSION naming it, and no user is stored.
func TestScramUsers_RefusedBesideAnOlderBinary(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.nodes[1].ctl.ProposeRetry(ctx, &coordinator.Command{RegisterBroker: &coordinator.Broker{ID: 9, KafkaAddr: "127.0.0.1:1"}})
	if err = errors.Join(err, res.Err); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broker 9 registered", func() bool { return c.nodes[1].meta.View().Brokers[9] != nil })
	alter, err := kadm.NewClient(c.client()).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := alter["alice"]; !errors.Is(got.Err, kerr.UnsupportedVersion) || !strings.Contains(got.ErrMessage, "broker 9") {
		t.Errorf("upsert beside a broker without SCRAM users: %v %q, want UNSUPPORTED_VERSION naming broker 9", got.Err, got.ErrMessage)
	}
	if users := c.nodes[1].meta.View().ScramUsers; len(users) != 0 {
		t.Errorf("%d users stored, want none", len(users))
	}
}
