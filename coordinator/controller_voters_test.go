package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/raftgroup"
)

// memNet connects raft hosts in this process: every message is copied
// (as the wire would) and delivered on a goroutine per link. It also
// records each configuration change a leader sends (ConfChangeV2
// entries in MsgApp), so that a test can tell how group 0 changed.
type memNet struct {
	mu      sync.Mutex
	hosts   map[uint64]*raftgroup.Host
	links   map[[2]uint64]chan []raftgroup.Envelope
	changes map[string]*raftpb.ConfChangeV2 // by term/index, so retransmits count once
	closed  bool
	wg      sync.WaitGroup
}

func newMemNet(t *testing.T) *memNet {
	n := &memNet{hosts: map[uint64]*raftgroup.Host{}, links: map[[2]uint64]chan []raftgroup.Envelope{},
		changes: map[string]*raftpb.ConfChangeV2{}}
	t.Cleanup(n.close)
	return n
}

func (n *memNet) attach(id uint64, h *raftgroup.Host) {
	n.mu.Lock()
	n.hosts[id] = h
	n.mu.Unlock()
}

func (n *memNet) detach(id uint64) {
	n.mu.Lock()
	delete(n.hosts, id)
	n.mu.Unlock()
}

func (n *memNet) has(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hosts[id] != nil
}

func (n *memNet) close() {
	n.mu.Lock()
	n.closed = true
	for k, c := range n.links {
		close(c)
		delete(n.links, k)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// voterChanges returns the joint configuration changes sent so far
// (controller_voters.go's; learners are added by simple ones).
func (n *memNet) voterChanges() []*raftpb.ConfChangeV2 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*raftpb.ConfChangeV2
	for _, cc := range n.changes {
		if len(cc.GetChanges()) > 0 && cc.GetTransition() == raftpb.ConfChangeTransition_ConfChangeTransitionJointImplicit {
			out = append(out, cc)
		}
	}
	return out
}

type memTransport struct {
	net  *memNet
	from uint64
}

func (t memTransport) Send(to uint64, batch []raftgroup.Envelope) bool {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.hosts[t.from] == nil {
		return false
	}
	out := make([]raftgroup.Envelope, len(batch))
	for i, e := range batch {
		out[i] = raftgroup.Envelope{Group: e.Group, Msg: cloneMsg(e.Msg)}
		n.noteConfChanges(e.Msg)
	}
	k := [2]uint64{t.from, to}
	c := n.links[k]
	if c == nil {
		c = make(chan []raftgroup.Envelope, 1024)
		n.links[k] = c
		n.wg.Add(1)
		go n.carry(t.from, to, c)
	}
	select {
	case c <- out:
		return true
	default:
		return false
	}
}

// noteConfChanges records the ConfChangeV2 entries of m. Callers hold mu.
func (n *memNet) noteConfChanges(m *raftpb.Message) {
	for _, e := range m.GetEntries() {
		if e.GetType() != raftpb.EntryConfChangeV2 {
			continue
		}
		var cc raftpb.ConfChangeV2
		if proto.Unmarshal(e.GetData(), &cc) == nil {
			n.changes[fmt.Sprintf("%d/%d", e.GetTerm(), e.GetIndex())] = &cc
		}
	}
}

func (n *memNet) carry(from, to uint64, c chan []raftgroup.Envelope) {
	defer n.wg.Done()
	for batch := range c {
		n.mu.Lock()
		h, up := n.hosts[to], n.hosts[from] != nil
		n.mu.Unlock()
		if h != nil && up {
			h.Receive(from, batch)
		}
	}
}

func (t memTransport) SendSnapshot(to uint64, env raftgroup.Envelope, body io.ReadCloser, done func(error)) {
	n := t.net
	n.mu.Lock()
	h := n.hosts[to]
	n.mu.Unlock()
	env.Msg = cloneMsg(env.Msg)
	go func() {
		var data []byte
		var err error
		if body != nil {
			data, err = io.ReadAll(body)
			body.Close()
		}
		switch {
		case err != nil:
		case h == nil:
			err = errors.New("memnet: peer unreachable")
		default:
			err = h.ReceiveSnapshot(t.from, env, bytes.NewReader(data))
		}
		done(err)
	}()
}

func cloneMsg(m *raftpb.Message) *raftpb.Message {
	return proto.Clone(m).(*raftpb.Message)
}

// ctlCluster is controllers on real raft hosts (real WALs) over memNet.
type ctlCluster struct {
	t       *testing.T
	net     *memNet
	initial []uint64
	mod     func(*ControllerConfig)
	ctls    map[uint64]*Controller
	hosts   map[uint64]*raftgroup.Host
}

func newCtlCluster(t *testing.T, initial []uint64, mod func(*ControllerConfig)) *ctlCluster {
	c := &ctlCluster{t: t, net: newMemNet(t), initial: initial, mod: mod,
		ctls: map[uint64]*Controller{}, hosts: map[uint64]*raftgroup.Host{}}
	t.Cleanup(func() {
		if t.Failed() {
			for id, ctl := range c.ctls {
				st := ctl.cfg.Metadata.View()
				var alive []string
				for _, bid := range st.BrokerIDs() {
					alive = append(alive, fmt.Sprintf("%d:%v", bid, st.Brokers[bid].Alive))
				}
				t.Logf("node %d: %+v brokers %v", id, ctl.Status(), alive)
			}
		}
		for id := range c.ctls {
			c.stop(id)
		}
	})
	for _, id := range initial {
		c.start(id, initial)
	}
	return c
}

// start runs node id's controller, with nodes as its initial cluster
// (nil: a joining node).
func (c *ctlCluster) start(id uint64, nodes []uint64) *Controller {
	c.t.Helper()
	hc := raftgroup.DefaultConfig()
	hc.NodeID, hc.DataDir, hc.Transport = id, c.t.TempDir(), memTransport{net: c.net, from: id}
	hc.TickInterval, hc.ElectionTicks = 10*time.Millisecond, 10
	h, err := raftgroup.NewHost(hc)
	if err != nil {
		c.t.Fatal(err)
	}
	c.net.attach(id, h)
	cfg := ControllerConfig{NodeID: id, Host: h, Metadata: NewMetadata(), Nodes: nodes,
		DeadAfter: 300 * time.Millisecond, Connected: c.net.has, HasPeer: c.net.has,
		Local: func() []LocalReplica { return nil }, Reconcile: func(*State) {}, ReconcileInterval: time.Second}
	if c.mod != nil {
		c.mod(&cfg)
	}
	ctl, err := NewController(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctl.Start(Broker{ID: id, KafkaAddr: fmt.Sprintf("h%d:9092", id), PeerAddr: fmt.Sprintf("h%d:9093", id),
		Incarnation: fmt.Sprint(id), StartID: NewStartID()})
	c.ctls[id], c.hosts[id] = ctl, h
	return ctl
}

func (c *ctlCluster) stop(id uint64) {
	c.net.detach(id)
	c.ctls[id].Close()
	_ = c.hosts[id].Close()
	delete(c.ctls, id)
	delete(c.hosts, id)
}

// join admits node id through node via and starts it.
func (c *ctlCluster) join(id, via uint64) {
	c.t.Helper()
	mustPropose(c.t, c.ctls[via], &Command{AdmitNode: &AdmitNode{ID: id, PeerAddr: fmt.Sprintf("h%d:9093", id), Incarnation: fmt.Sprint(id)}})
	c.start(id, nil)
}

// waitConf waits until every running node's group 0 has voters and
// learners as given, out of any joint configuration.
func (c *ctlCluster) waitConf(voters, learners []uint64) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("voters %v, learners %v on every node", voters, learners), func() bool {
		for _, ctl := range c.ctls {
			s := ctl.Status()
			if !slices.Equal(s.Voters, voters) || !slices.Equal(s.Learners, learners) || len(s.VotersOutgoing) > 0 {
				return false
			}
		}
		return true
	})
}

// Group 0 grows from 3 to 5 voters by one joint change once two nodes
// have joined (a fourth alone stays a learner), and a voter dead for
// longer than VoterReplaceAfter is replaced by a live learner that joins
// later, in one joint change too; the dead voter becomes a learner.
func TestController_VotersFollowJoinsAndDeaths(t *testing.T) {
	c := newCtlCluster(t, []uint64{1, 2, 3}, func(cfg *ControllerConfig) { cfg.VoterReplaceAfter = 500 * time.Millisecond })
	c.waitConf([]uint64{1, 2, 3}, nil)
	waitFor(t, "three brokers registered", func() bool { return len(c.ctls[1].cfg.Metadata.View().Brokers) == 3 })

	c.join(4, 2)
	c.waitConf([]uint64{1, 2, 3}, []uint64{4})
	waitFor(t, "node 4 registered", func() bool { b := c.ctls[1].cfg.Metadata.View().Brokers[4]; return b != nil && b.Alive })
	time.Sleep(300 * time.Millisecond) // a few rounds of the metadata leader's loop: four nodes keep three voters
	c.waitConf([]uint64{1, 2, 3}, []uint64{4})

	c.join(5, 3)
	c.waitConf([]uint64{1, 2, 3, 4, 5}, nil)
	changes := c.net.voterChanges()
	if len(changes) != 1 || len(changes[0].GetChanges()) != 2 || changes[0].GetChanges()[0].GetType() != raftpb.ConfChangeAddNode {
		t.Fatalf("voter changes %v, want one joint change promoting 4 and 5", changes)
	}

	// A voter that is not the metadata leader dies for good.
	var victim uint64
	for _, id := range []uint64{2, 3, 4, 5} {
		if c.ctls[id].Leader() != id {
			victim = id
			break
		}
	}
	c.stop(victim)
	c.join(6, c.anyLeader())
	want := slices.DeleteFunc([]uint64{1, 2, 3, 4, 5, 6}, func(id uint64) bool { return id == victim })
	c.waitConf(want, []uint64{victim})
	if n := len(c.net.voterChanges()); n != 2 {
		t.Errorf("%d voter changes, want 2", n)
	}
}

func (c *ctlCluster) anyLeader() uint64 {
	c.t.Helper()
	var l uint64
	waitFor(c.t, "a metadata leader", func() bool {
		for id, ctl := range c.ctls {
			if ctl.Leader() == id {
				l = id
				return true
			}
		}
		return false
	})
	return l
}

// A voter's death shorter than VoterReplaceAfter changes nothing, even
// with a caught-up learner to take its place.
func TestController_BriefDeathKeepsVoters(t *testing.T) {
	c := newCtlCluster(t, []uint64{1, 2, 3}, func(cfg *ControllerConfig) { cfg.VoterReplaceAfter = time.Hour })
	c.waitConf([]uint64{1, 2, 3}, nil)
	c.join(4, 1)
	c.waitConf([]uint64{1, 2, 3}, []uint64{4})
	waitFor(t, "four brokers registered", func() bool { return len(c.ctls[4].cfg.Metadata.View().Brokers) == 4 })
	victim := uint64(1)
	if c.anyLeader() == 1 {
		victim = 2
	}
	c.stop(victim)
	waitFor(t, "the dead voter marked dead", func() bool {
		b := c.ctls[c.anyLeader()].cfg.Metadata.View().Brokers[victim]
		return b != nil && !b.Alive
	})
	time.Sleep(500 * time.Millisecond) // rounds of the metadata leader's loop
	c.waitConf([]uint64{1, 2, 3}, []uint64{4})
	if n := len(c.net.voterChanges()); n != 0 {
		t.Errorf("%d voter changes after a brief death", n)
	}
}

// voterChange promotes with AddNode and demotes to learner.
func TestVoterChange(t *testing.T) {
	cc := voterChange([]uint64{1, 2, 3}, []uint64{1, 3, 4})
	want := []string{"ConfChangeAddNode 4", "ConfChangeAddLearnerNode 2"}
	var got []string
	for _, ch := range cc.GetChanges() {
		got = append(got, fmt.Sprintf("%s %d", ch.GetType(), ch.GetNodeId()))
	}
	if !slices.Equal(got, want) || cc.GetTransition() != raftpb.ConfChangeTransition_ConfChangeTransitionJointImplicit {
		t.Errorf("voterChange: %v %v, want %v, joint implicit", got, cc.GetTransition(), want)
	}
}

// A cluster bootstrapped with five voters (the initial cluster decides
// the bootstrap) keeps three when MetadataVoters says so: the leader and
// two more stay voters, the other two follow as learners.
func TestController_ShrinksToMetadataVoters(t *testing.T) {
	c := newCtlCluster(t, []uint64{1, 2, 3, 4, 5}, func(cfg *ControllerConfig) { cfg.MetadataVoters = 3 })
	waitFor(t, "three voters and two learners on every node", func() bool {
		var first []uint64
		for _, ctl := range c.ctls {
			s := ctl.Status()
			if len(s.Voters) != 3 || len(s.Learners) != 2 || len(s.VotersOutgoing) > 0 {
				return false
			}
			if first != nil && !slices.Equal(first, s.Voters) {
				return false
			}
			first = s.Voters
		}
		return true
	})
	if l := c.anyLeader(); !slices.Contains(c.ctls[l].Status().Voters, l) {
		t.Errorf("leader %d is not a voter: %v", l, c.ctls[l].Status().Voters)
	}
}
