package groups

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/raftgroup"
)

// fakeLog stands in for the offsets partition's raft group (a function
// field fake, so the coordinator is tested on its own): a proposal is
// applied at once to the machine, and every entry is kept for replay.
type fakeLog struct {
	mu      sync.Mutex
	m       *Machine
	entries []raftgroup.Entry
	refuse  bool // proposals fail, as on a deposed leader
}

func (l *fakeLog) propose(_ context.Context, data []byte) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse {
		return nil, raftgroup.ErrNotLeader
	}
	e := raftgroup.Entry{Index: uint64(len(l.entries) + 1), Term: 1, Data: data}
	l.entries = append(l.entries, e)
	return l.m.Apply(e)
}

// clock is a fake clock the tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t   *testing.T
	log *fakeLog
	clk *clock
	c   *Coordinator
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, log: &fakeLog{m: NewMachine()}, clk: &clock{now: time.UnixMilli(1_700_000_000_000)}}
	cfg := DefaultConfig()
	cfg.Machine, cfg.Propose, cfg.Now = h.log.m, h.log.propose, h.clk.Now
	cfg.MinSessionTimeout = time.Second
	cfg.InitialRebalanceDelay = 3 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// joinCall is a JoinGroup in flight.
type joinCall struct {
	ch chan *kmsg.JoinGroupResponse
}

func (j joinCall) wait(t *testing.T) *kmsg.JoinGroupResponse {
	t.Helper()
	select {
	case r := <-j.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("JoinGroup never answered")
		return nil
	}
}

func (j joinCall) pending() bool { return len(j.ch) == 0 }

func joinReq(group, member, instance string, protos ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID = group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10_000, 20_000
	r.ProtocolType = "consumer"
	if instance != "" {
		r.InstanceID = kmsg.StringPtr(instance)
	}
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	for _, p := range protos {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: subscription("t")})
	}
	return r
}

func subscription(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func (h *harness) join(req *kmsg.JoinGroupRequest) joinCall {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	h.c.Join(req, Client{ID: "cl", Host: "/127.0.0.1"}, func(r *kmsg.JoinGroupResponse) { ch <- r })
	return joinCall{ch}
}

// newMember runs the MEMBER_ID_REQUIRED round trip and returns the id.
func (h *harness) newMember(group string) string {
	h.t.Helper()
	r := h.join(joinReq(group, "", "")).wait(h.t)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		h.t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	return r.MemberID
}

type syncCall struct{ ch chan *kmsg.SyncGroupResponse }

func (s syncCall) wait(t *testing.T) *kmsg.SyncGroupResponse {
	t.Helper()
	select {
	case r := <-s.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("SyncGroup never answered")
		return nil
	}
}

func (h *harness) sync(group, member string, gen int32, assign map[string]string) syncCall {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, member, gen
	for id, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	h.c.Sync(r, func(resp *kmsg.SyncGroupResponse) { ch <- resp })
	return syncCall{ch}
}

func (h *harness) heartbeat(group, member string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	return h.c.Heartbeat(r).ErrorCode
}

func (h *harness) commit(group, member string, gen int32, offset int64) int16 {
	return h.c.Commit(CommitRequest{Group: group, Generation: gen, MemberID: member,
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 0}, Offset: offset, Metadata: "m"}}})
}

func (h *harness) snapshot() string {
	h.t.Helper()
	b, err := h.log.m.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// stableGroup brings members ids into a stable group and returns the
// generation; each member's assignment is "a-<id>".
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	var ids []string
	var calls []joinCall
	for i := 0; i < n; i++ {
		id := h.newMember(group)
		ids = append(ids, id)
		calls = append(calls, h.join(joinReq(group, id, "")))
	}
	h.clk.advance(h.c.cfg.InitialRebalanceDelay)
	h.c.Tick()
	return ids, h.finishRebalance(group, ids, calls)
}

// finishRebalance waits for the join answers, syncs everyone and checks
// each gets its assignment.
func (h *harness) finishRebalance(group string, ids []string, calls []joinCall) int32 {
	h.t.Helper()
	var gen int32
	leader := ""
	for _, c := range calls {
		r := c.wait(h.t)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: code %d", r.ErrorCode)
		}
		gen, leader = r.Generation, r.LeaderID
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncs []syncCall
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.sync(group, id, gen, nil))
		}
	}
	syncs = append(syncs, h.sync(group, leader, gen, assign))
	for _, s := range syncs {
		if r := s.wait(h.t); r.ErrorCode != 0 {
			h.t.Fatalf("sync: code %d", r.ErrorCode)
		}
	}
	return gen
}
