package coordinator

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftq/raftq/raftgroup"
)

// noNet is the transport of a one-node host: there is nobody to send to.
type noNet struct{}

func (noNet) Send(uint64, []raftgroup.Envelope) bool { return true }
func (noNet) SendSnapshot(_ uint64, _ raftgroup.Envelope, body io.ReadCloser, done func(error)) {
	if body != nil {
		_ = body.Close()
	}
	done(nil)
}

// fakeLocal is a partition replica the controller sees on its node.
type fakeLocal struct {
	group uint64
	mu    sync.Mutex
	term  uint64 // leading at term; 0: not leading
	moved []uint64
}

func (f *fakeLocal) Group() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.group
}
func (f *fakeLocal) LeaderTerm() (bool, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term != 0, f.term
}
func (f *fakeLocal) TransferLeadership(_ context.Context, to uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moved = append(f.moved, to)
	return nil
}
func (f *fakeLocal) transfers() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.moved...)
}

// newTestController starts a controller on a one-node raft host with a
// real WAL (node 1, group 0's only voter).
func newTestController(t *testing.T, mod func(*ControllerConfig)) *Controller {
	t.Helper()
	return newTestControllerAs(t, Broker{ID: 1, KafkaAddr: "127.0.0.1:9092"}, mod)
}

// newTestControllerAs is newTestController registering self.
func newTestControllerAs(t *testing.T, self Broker, mod func(*ControllerConfig)) *Controller {
	t.Helper()
	hc := raftgroup.DefaultConfig()
	hc.NodeID, hc.DataDir, hc.Transport = 1, t.TempDir(), noNet{}
	hc.TickInterval, hc.ElectionTicks = 10*time.Millisecond, 10
	h, err := raftgroup.NewHost(hc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ControllerConfig{NodeID: 1, Host: h, Metadata: NewMetadata(), Nodes: []uint64{1},
		DeadAfter: 200 * time.Millisecond, Connected: func(uint64) bool { return true },
		Local: func() []LocalReplica { return nil }, Reconcile: func(*State) {}, ReconcileInterval: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		_ = h.Close()
	})
	c.Start(self)
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustPropose(t *testing.T, c *Controller, cmd *Command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.ProposeRetry(ctx, cmd)
	if err != nil || res.Err != nil {
		t.Fatalf("propose %+v: %v %v", cmd, err, res.Err)
	}
}

// The controller registers its broker, reports the partitions its node
// leads as leadership hints, and hands leadership back to an alive
// preferred replica.
func TestController_RegistersHintsAndBalances(t *testing.T) {
	local := &fakeLocal{term: 3}
	reconciled := make(chan *State, 100)
	c := newTestController(t, func(cfg *ControllerConfig) {
		cfg.Local = func() []LocalReplica { return []LocalReplica{local} }
		cfg.Reconcile = func(s *State) {
			select {
			case reconciled <- s:
			default:
			}
		}
		cfg.LeaderBalanceInterval = 20 * time.Millisecond
	})
	m := c.cfg.Metadata
	waitFor(t, "the registration", func() bool { b, ok := m.View().Brokers[1]; return ok && b.Alive })
	mustPropose(t, c, &Command{RegisterBroker: &Broker{ID: 2, KafkaAddr: "127.0.0.1:9093"}})
	mustPropose(t, c, &Command{CreateTopic: &CreateTopic{Name: "t", ID: [16]byte{1}, Partitions: 1, ReplicationFactor: 2,
		Assignment: [][]uint64{{2, 1}}}})
	ref, ok := m.View().PartitionByGroup(m.View().Topics["t"].Partitions[0].Group)
	if !ok {
		t.Fatal("no partition")
	}
	local.mu.Lock()
	local.group = ref.Partition.Group
	local.mu.Unlock()
	waitFor(t, "the leadership hint", func() bool {
		p := m.View().Topics["t"].Partitions[0]
		return p.Leader == 1 && p.LeaderTerm == 3
	})
	waitFor(t, "a transfer to the preferred replica", func() bool { return len(local.transfers()) > 0 })
	if got := local.transfers()[0]; got != 2 {
		t.Errorf("leadership handed to %d, want the preferred replica 2", got)
	}
	select {
	case s := <-reconciled:
		if s == nil {
			t.Error("reconciled a nil state")
		}
	default:
		t.Error("the controller never reconciled")
	}
}

// The metadata leader marks a broker it does not hear from dead after
// DeadAfter, and alive again once it does.
func TestController_MarksUnheardBrokersDead(t *testing.T) {
	var mu sync.Mutex
	connected := false
	c := newTestController(t, func(cfg *ControllerConfig) {
		cfg.Connected = func(id uint64) bool { mu.Lock(); defer mu.Unlock(); return connected }
	})
	m := c.cfg.Metadata
	mustPropose(t, c, &Command{RegisterBroker: &Broker{ID: 2, KafkaAddr: "127.0.0.1:9093"}})
	waitFor(t, "broker 2 marked dead", func() bool { b := m.View().Brokers[2]; return b != nil && !b.Alive })
	if b := m.View().Brokers[1]; b == nil || !b.Alive {
		t.Error("the controller's own broker was marked dead")
	}
	mu.Lock()
	connected = true
	mu.Unlock()
	waitFor(t, "broker 2 alive again", func() bool { return m.View().Brokers[2].Alive })
}

func TestVoters(t *testing.T) {
	for _, c := range []struct {
		nodes []uint64
		want  int
	}{{[]uint64{1}, 1}, {[]uint64{2, 1}, 1}, {[]uint64{3, 1, 2}, 3}, {[]uint64{1, 2, 3, 4}, 3}, {[]uint64{1, 2, 3, 4, 5, 6, 7}, 5}} {
		if got := Voters(c.nodes); len(got) != c.want || got[0] != 1 {
			t.Errorf("Voters(%v) = %v, want the first %d in order", c.nodes, got, c.want)
		}
	}
}

// An ISR partition gets no leadership hints (group 0 elects its leader),
// and leader balance hands it to its preferred replica only once that
// replica is in the ISR.
func TestController_ISRPartitionsNoHintsBalanceIntoTheISR(t *testing.T) {
	local := &fakeLocal{term: 7}
	c := newTestController(t, func(cfg *ControllerConfig) {
		cfg.Local = func() []LocalReplica { return []LocalReplica{local} }
		cfg.LeaderBalanceInterval = 20 * time.Millisecond
	})
	m := c.cfg.Metadata
	waitFor(t, "the registration", func() bool { b, ok := m.View().Brokers[1]; return ok && b.Alive })
	mustPropose(t, c, &Command{RegisterBroker: &Broker{ID: 2, KafkaAddr: "127.0.0.1:9093"}})
	mustPropose(t, c, &Command{CreateTopic: &CreateTopic{Name: "i", ID: [16]byte{2}, Partitions: 1, ReplicationFactor: 2,
		Assignment: [][]uint64{{2, 1}}, Configs: map[string]string{"replication.mode": ModeISR}, AllowISR: true}})
	// Fence the preferred replica 2: it leaves the ISR and 1 leads; the
	// liveness loop (which hears from everyone) then unfences it, out of
	// the ISR.
	mustPropose(t, c, &Command{SetAlive: &SetAlive{ID: 2, Alive: false}})
	waitFor(t, "broker 2 alive again, out of the ISR", func() bool {
		p := m.View().Topics["i"].Partitions[0]
		return m.View().Brokers[2].Alive && p.Leader == 1 && slices.Equal(p.ISR, []uint64{1})
	})
	p := m.View().Topics["i"].Partitions[0]
	local.mu.Lock()
	// A term past the metadata's: a raft replica would hint it.
	local.group, local.term = p.Group, p.LeaderTerm+1
	local.mu.Unlock()
	before := m.View()
	time.Sleep(300 * time.Millisecond) // three hint rounds, fifteen balance rounds
	if got := local.transfers(); len(got) != 0 {
		t.Errorf("leadership handed to %v while the preferred replica is out of the ISR", got)
	}
	// A hint for an ISR partition changes nothing at apply, so an entry
	// applied meanwhile that left the state as it was is a hint. Entries
	// that did change it (a liveness flap on a loaded machine) are not.
	if after := m.View(); after.Index != before.Index && sameIgnoringIndex(before, after) {
		t.Errorf("group 0 applied %d entries that changed nothing while only an ISR partition was led here: hints", after.Index-before.Index)
	}
	mustPropose(t, c, &Command{AlterPartition: &AlterPartition{Items: []AlterPartitionItem{{Group: p.Group, Leader: 1,
		LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch,
		ISR: []ISRMember{{ID: 1, BrokerEpoch: m.View().Brokers[1].Epoch}, {ID: 2, BrokerEpoch: m.View().Brokers[2].Epoch}}}}}})
	waitFor(t, "a transfer to the preferred replica, back in the ISR", func() bool { return len(local.transfers()) > 0 })
	if got := local.transfers()[0]; got != 2 {
		t.Errorf("leadership handed to %d, want the preferred replica 2", got)
	}
}

// A registration with another StartID (another start of the process) is
// replaced by this start's, which is what makes group 0 fence a restarted
// broker out of every ISR.
func TestController_ReRegistersOnANewStart(t *testing.T) {
	self := Broker{ID: 1, KafkaAddr: "127.0.0.1:9092", StartID: NewStartID()}
	c := newTestControllerAs(t, self, nil)
	m := c.cfg.Metadata
	waitFor(t, "the registration", func() bool { b, ok := m.View().Brokers[1]; return ok && b.StartID == self.StartID })
	epoch := m.View().Brokers[1].Epoch
	old := self
	old.StartID = NewStartID()
	if old.StartID == self.StartID || len(old.StartID) != 32 {
		t.Fatalf("start ids %q and %q: want two different 16-byte hex ids", self.StartID, old.StartID)
	}
	mustPropose(t, c, &Command{RegisterBroker: &old})
	waitFor(t, "the re-registration", func() bool { return m.View().Brokers[1].StartID == self.StartID })
	if got := m.View().Brokers[1].Epoch; got <= epoch {
		t.Errorf("broker epoch %d after re-registering, want above %d", got, epoch)
	}
}

// The metadata leader proposes its EligibleLeaderReplicas flag whenever
// the cluster's feature differs, on or off: its flag wins.
func TestController_SyncsEligibleLeaderReplicas(t *testing.T) {
	for _, want := range []bool{true, false} {
		c := newTestController(t, func(cfg *ControllerConfig) { cfg.EligibleLeaderReplicas = want })
		m := c.cfg.Metadata
		waitFor(t, "the registration", func() bool { _, ok := m.View().Brokers[1]; return ok })
		mustPropose(t, c, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: !want}})
		waitFor(t, "the flag's value back", func() bool { return m.View().EligibleLeaderReplicas == want })
	}
}

// The metadata leader dates each broker by the transport's last frame
// from it, connected or not: a new metadata leader counts the old one's
// death from when it died, not from its own election, and a paused
// broker, whose connections stay open, falls silent all the same.
// Without a frame it is now while connected, else the first sight.
func TestController_HeardAtTheTransportsLastFrame(t *testing.T) {
	now := time.Now()
	heard, prev := now.Add(-2*time.Second), now.Add(-time.Second)
	connected := map[uint64]bool{2: true, 4: true}
	c := &Controller{cfg: ControllerConfig{NodeID: 1, Connected: func(id uint64) bool { return connected[id] },
		LastHeard: func(id uint64) time.Time {
			switch id {
			case 2, 3:
				return heard
			case 4:
				return now.Add(time.Second) // a clock step: not in the past
			}
			return time.Time{}
		}}}
	for _, tc := range []struct {
		id   uint64
		seen bool
		want time.Time
	}{
		{1, true, now},   // itself
		{2, true, heard}, // connected but silent (paused)
		{3, true, heard}, // gone, dated by its last frame
		{4, true, now},   // connected, the frame's time unusable
		{5, true, prev},  // gone, never heard: as before
		{5, false, now},  // never heard, first sight: a grace period
	} {
		if got := c.heardAt(tc.id, now, prev, tc.seen); !got.Equal(tc.want) {
			t.Errorf("broker %d (seen %v) heard at %v, want %v", tc.id, tc.seen, got, tc.want)
		}
	}
	c.cfg.LastHeard = nil
	if got := c.heardAt(2, now, prev, true); !got.Equal(now) {
		t.Errorf("without the transport's view, a connected broker: %v, want now", got)
	}
}

// sameIgnoringIndex reports whether two metadata states differ in their
// applied index only.
func sameIgnoringIndex(a, b *State) bool {
	x, y := *a, *b
	x.Index, y.Index = 0, 0
	return reflect.DeepEqual(x, y)
}

// The metadata leader proposes its node's topic defaults whenever the
// cluster's differ: its broker configs win.
func TestController_SyncsTopicDefaults(t *testing.T) {
	want, err := ResolveTopicDefaults(map[string]string{"log.retention.hours": "1", "log.cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestController(t, func(cfg *ControllerConfig) { cfg.TopicDefaults = want })
	m := c.cfg.Metadata
	waitFor(t, "the node's topic defaults", func() bool { return m.View().TopicDefaults.Equal(want) })
	mustPropose(t, c, &Command{SetTopicDefaults: &SetTopicDefaults{ConfigVersion: CurrentConfigVersion}})
	waitFor(t, "the node's topic defaults back", func() bool { return m.View().TopicDefaults.Equal(want) })
}

// A restarted controller reconciles only the state group 0 had committed
// when it opened, never a replayed one on the way: a state from before a
// partition moved onto the node would have it drop that replica's data.
func TestController_ReconcilesNoReplayedState(t *testing.T) {
	dir := t.TempDir()
	open := func(reconcile func(*State)) (*Controller, *raftgroup.Host) {
		hc := raftgroup.DefaultConfig()
		hc.NodeID, hc.DataDir, hc.Transport = 1, dir, noNet{}
		hc.TickInterval, hc.ElectionTicks = 10*time.Millisecond, 10
		h, err := raftgroup.NewHost(hc)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewController(ControllerConfig{NodeID: 1, Host: h, Metadata: NewMetadata(), Nodes: []uint64{1},
			DeadAfter: time.Hour, Connected: func(uint64) bool { return true },
			Local: func() []LocalReplica { return nil }, Reconcile: reconcile, ReconcileInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c.Start(Broker{ID: 1, KafkaAddr: "127.0.0.1:9092", Incarnation: "i", StartID: NewStartID()})
		return c, h
	}
	c, h := open(func(*State) {})
	waitFor(t, "registration", func() bool { return c.Registered() })
	for i := range 300 {
		mustPropose(t, c, &Command{CreateTopic: &CreateTopic{Name: fmt.Sprintf("t%d", i), ID: [16]byte{byte(i), byte(i >> 8), 1}, Partitions: 1, ReplicationFactor: 1}})
	}
	final := c.cfg.Metadata.View().Index
	c.Close()
	_ = h.Close()

	var mu sync.Mutex
	var seen []uint64
	c, h = open(func(s *State) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s.Index)
	})
	defer func() { c.Close(); _ = h.Close() }()
	waitFor(t, "a reconcile", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if seen[0] < final {
		t.Fatalf("first reconcile after the restart saw the state at %d, a replayed one (group 0 had committed %d)", seen[0], final)
	}
}
