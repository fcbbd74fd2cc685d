package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionFor_MatchesKafka(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int32
	}{
		{"", 0},
		{"abc", 96354},
		{"hello", 99162322},
		{"polygenelubricants", -1 << 31}, // Java's MIN_VALUE hash: Utils.abs gives 0
		{"€", 8364},
		{"𝄞", 55348*31 + 56606}, // one code point, two UTF-16 units (0xD834 0xDD1E)
	} {
		if got := javaHashCode(tc.group); got != tc.hash {
			t.Errorf("hashCode(%q) = %d, want %d", tc.group, got, tc.hash)
		}
	}
	if got := PartitionFor("polygenelubricants", 5); got != 0 {
		t.Errorf("PartitionFor(MIN_VALUE hash) = %d, want 0", got)
	}
	if got, want := PartitionFor("hello", 5), int32(99162322%5); got != want {
		t.Errorf("PartitionFor(hello, 5) = %d, want %d", got, want)
	}
}

func TestCoordinator_JoinSyncHeartbeat(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	if gen != 1 {
		t.Fatalf("first generation = %d, want 1", gen)
	}
	g := h.log.m.Group("g")
	if g.Phase != PhaseStable || len(g.Members) != 2 || g.Protocol != "range" {
		t.Fatalf("group after sync: %+v", g)
	}
	for _, id := range ids {
		if got := string(g.Members[id].Assignment); got != "a-"+id {
			t.Errorf("assignment of %s = %q", id, got)
		}
		if code := h.heartbeat("g", id, gen); code != 0 {
			t.Errorf("heartbeat: code %d", code)
		}
	}
	if code := h.heartbeat("g", ids[0], gen-1); code != kerr.IllegalGeneration.Code {
		t.Errorf("stale heartbeat: code %d, want ILLEGAL_GENERATION", code)
	}
	if code := h.heartbeat("g", "nobody", gen); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown heartbeat: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	// A follower that syncs again in a stable group gets its assignment.
	follower := ids[0]
	if follower == g.Leader {
		follower = ids[1]
	}
	if r := h.sync("g", follower, gen, nil).wait(t); r.ErrorCode != 0 || string(r.MemberAssignment) != "a-"+follower {
		t.Errorf("stable sync: code %d assignment %q", r.ErrorCode, r.MemberAssignment)
	}
}

func TestCoordinator_NewMemberTriggersRebalance(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	newID := h.newMember("g")
	newJoin := h.join(joinReq("g", newID, ""))
	if !newJoin.pending() {
		t.Fatal("a new member's join must wait for the others")
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat during rebalance: code %d, want REBALANCE_IN_PROGRESS", code)
		}
	}
	if d, _ := h.c.Describe("g"); d.State != PhasePreparing {
		t.Fatalf("state = %s, want PreparingRebalance", d.State)
	}
	calls := []joinCall{newJoin}
	for _, id := range ids {
		calls = append(calls, h.join(joinReq("g", id, "")))
	}
	all := append([]string{newID}, ids...)
	if gen2 := h.finishRebalance("g", all, calls); gen2 != gen+1 {
		t.Fatalf("generation = %d, want %d", gen2, gen+1)
	}
	if n := len(h.log.m.Group("g").Members); n != 3 {
		t.Fatalf("members = %d, want 3", n)
	}
}

func TestCoordinator_SessionTimeoutRemovesMember(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	h.clk.advance(6 * time.Second)
	if code := h.heartbeat("g", ids[0], gen); code != 0 {
		t.Fatal(code)
	}
	h.clk.advance(6 * time.Second) // ids[1] is now 12s silent, past its 10s session
	h.c.Tick()
	g := h.log.m.Group("g")
	if g.Members[ids[1]] != nil || g.Phase != PhasePreparing {
		t.Fatalf("after expiry: phase %s members %v", g.Phase, g.MemberIDs())
	}
	if code := h.heartbeat("g", ids[0], gen); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("survivor heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	if gen2 := h.finishRebalance("g", ids[:1], []joinCall{h.join(joinReq("g", ids[0], ""))}); gen2 != gen+1 {
		t.Fatalf("generation %d, want %d", gen2, gen+1)
	}
}

func TestCoordinator_RebalanceTimeoutDropsSilentMembers(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	call := h.join(joinReq("g", ids[0], "", "range", "roundrobin")) // changed metadata: rebalance
	if !call.pending() {
		t.Fatal("join should wait for ids[1]")
	}
	h.clk.advance(5 * time.Second)
	h.heartbeat("g", ids[1], gen) // alive, but never rejoins
	h.clk.advance(16 * time.Second)
	h.c.Tick()
	r := call.wait(t)
	if r.ErrorCode != 0 || r.Generation != gen+1 || r.LeaderID != ids[0] || len(r.Members) != 1 {
		t.Fatalf("join after rebalance timeout: %+v", r)
	}
	if code := h.heartbeat("g", ids[1], gen); code != kerr.UnknownMemberID.Code {
		t.Fatalf("dropped member heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
}

func TestCoordinator_SyncTimeoutRemovesLeader(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.newMember("g"), h.newMember("g")
	ja, jb := h.join(joinReq("g", a, "")), h.join(joinReq("g", b, ""))
	h.clk.advance(3 * time.Second)
	h.c.Tick()
	ra, rb := ja.wait(t), jb.wait(t)
	follower := b
	if ra.LeaderID == b {
		follower = a
	}
	s := h.sync("g", follower, rb.Generation, nil)
	h.clk.advance(21 * time.Second)
	h.c.Tick()
	if r := s.wait(t); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("follower sync after the leader's sync timeout: %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	if g := h.log.m.Group("g"); g.Members[ra.LeaderID] != nil || g.Members[follower] == nil {
		t.Fatalf("members after sync timeout: %v", g.MemberIDs())
	}
}

func TestCoordinator_LeaveBatchAndEmpty(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}, {MemberID: "ghost"}}
	resp := h.c.Leave(req)
	if resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave codes: %+v", resp.Members)
	}
	if g := h.log.m.Group("g"); g.Phase != PhasePreparing || len(g.Members) != 1 {
		t.Fatalf("after one leaves: %s %v", g.Phase, g.MemberIDs())
	}
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version, old.Group, old.MemberID = 1, "g", ids[1]
	if r := h.c.Leave(old); r.ErrorCode != 0 {
		t.Fatalf("v1 leave: %d", r.ErrorCode)
	}
	g := h.log.m.Group("g")
	if g.Phase != PhaseEmpty || len(g.Members) != 0 || g.Generation != gen+1 {
		t.Fatalf("after all leave: %+v", g)
	}
	if d, _ := h.c.Describe("g"); d.State != PhaseEmpty {
		t.Fatalf("described state %s", d.State)
	}
}

func TestCoordinator_StaticMemberRejoinKeepsAssignment(t *testing.T) {
	h := newHarness(t, nil)
	j := h.join(joinReq("g", "", "inst-1"))
	h.clk.advance(3 * time.Second)
	h.c.Tick()
	r := j.wait(t)
	if r.ErrorCode != 0 {
		t.Fatalf("static join: %d", r.ErrorCode)
	}
	old, gen := r.MemberID, r.Generation
	if rs := h.sync("g", old, gen, map[string]string{old: "mine"}).wait(t); rs.ErrorCode != 0 {
		t.Fatal(rs.ErrorCode)
	}
	// The instance restarts and rejoins without its member id.
	r2 := h.join(joinReq("g", "", "inst-1")).wait(t)
	if r2.ErrorCode != 0 || r2.MemberID == old || r2.Generation != gen || !r2.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r2)
	}
	if got := string(h.log.m.Group("g").Members[r2.MemberID].Assignment); got != "mine" {
		t.Fatalf("assignment after rejoin = %q", got)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", old, gen, kmsg.StringPtr("inst-1")
	if code := h.c.Heartbeat(hb).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	before := h.snapshot()
	if code := h.c.Commit(CommitRequest{Group: "g", Generation: gen, MemberID: old, InstanceID: "inst-1",
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 0}, Offset: 5}}}); code != kerr.FencedInstanceID.Code {
		t.Fatalf("fenced commit: %d", code)
	}
	if h.snapshot() != before {
		t.Fatal("a fenced commit changed the state")
	}
}

func TestCoordinator_BadInputChangesNothing(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMetadataBytes = 1024 })
	ids, gen := h.stableGroup("g", 2)
	if code := h.commit("g", ids[0], gen, 10); code != 0 {
		t.Fatalf("good commit: %d", code)
	}
	before := h.snapshot()
	entries := len(h.log.entries)
	check := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Errorf("%s: code %d, want %d", what, got, want)
		}
	}
	check("stale generation commit", h.commit("g", ids[0], gen-1, 99), kerr.IllegalGeneration.Code)
	check("unknown member commit", h.commit("g", "ghost", gen, 99), kerr.UnknownMemberID.Code)
	check("simple commit to a live group", h.commit("g", "", -1, 99), kerr.UnknownMemberID.Code)
	check("commit to an unknown group with a generation", h.commit("nope", "x", 3, 1), kerr.IllegalGeneration.Code)
	check("join with no common protocol", h.join(joinReq("g", "", "", "roundrobin")).wait(t).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	other := joinReq("g", "", "")
	other.ProtocolType = "connect"
	check("join with another protocol type", h.join(other).wait(t).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	big := joinReq("g2", "", "")
	big.Protocols[0].Metadata = make([]byte, 2048)
	check("oversized metadata", h.join(big).wait(t).ErrorCode, kerr.MessageTooLarge.Code)
	short := joinReq("g2", "", "")
	short.SessionTimeoutMillis = 10
	check("session timeout below the minimum", h.join(short).wait(t).ErrorCode, kerr.InvalidSessionTimeout.Code)
	check("empty group id", h.join(joinReq("", "", "")).wait(t).ErrorCode, kerr.InvalidGroupID.Code)
	leader := h.log.m.Group("g").Leader
	if h.snapshot() != before || len(h.log.entries) != entries {
		t.Fatalf("bad input changed the state or proposed (%d -> %d entries)", entries, len(h.log.entries))
	}
	// An oversized assignment from the leader is refused, state unchanged.
	h.join(joinReq("g", leader, "", "range", "sticky")) // changed: rebalance
	var calls []joinCall
	for _, id := range ids {
		if id != leader {
			calls = append(calls, h.join(joinReq("g", id, "")))
		}
	}
	r := calls[0].wait(t)
	if rs := h.sync("g", leader, r.Generation, map[string]string{leader: string(make([]byte, 2048))}).wait(t); rs.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("oversized assignment: %d", rs.ErrorCode)
	}
	if g := h.log.m.Group("g"); g.Phase != PhaseCompleting {
		t.Fatalf("phase after a refused assignment: %s", g.Phase)
	}
	check("commit while completing", h.commit("g", ids[0], r.Generation, 1), kerr.RebalanceInProgress.Code)
}

func TestCoordinator_SimpleCommitsAndFetch(t *testing.T) {
	h := newHarness(t, nil)
	if code := h.commit("simple", "", -1, 42); code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	offs, code := h.c.FetchOffsets("simple", nil)
	o := offs[TopicPartition{"t", 0}]
	if code != 0 || o.Offset != 42 || o.Metadata != "m" || o.CommitMs != h.clk.Now().UnixMilli() {
		t.Fatalf("fetch: %+v code %d", offs, code)
	}
	if d, _ := h.c.Describe("simple"); d.State != PhaseEmpty {
		t.Fatalf("a simple-commit group is %s, want Empty", d.State)
	}
	if offs, _ := h.c.FetchOffsets("none", []TopicPartition{{"t", 0}}); len(offs) != 0 {
		t.Fatalf("unknown group has offsets %v", offs)
	}
}

func TestCoordinator_OffsetsExpireOnlyForEmptyGroups(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention, c.ExpireInterval = time.Hour, time.Minute
	})
	ids, gen := h.stableGroup("live", 1)
	if h.commit("live", ids[0], gen, 1) != 0 || h.commit("idle", "", -1, 1) != 0 {
		t.Fatal("commits refused")
	}
	for i := 0; i < 7; i++ { // keep the live member's session up across the hour
		h.clk.advance(9 * time.Minute)
		h.heartbeat("live", ids[0], gen)
		h.c.Tick()
	}
	if o, _ := h.c.FetchOffsets("idle", nil); len(o) != 0 {
		t.Fatalf("idle group's offsets survived retention: %v", o)
	}
	if h.log.m.Group("idle") != nil {
		t.Fatal("an empty group without offsets should be gone")
	}
	if o, _ := h.c.FetchOffsets("live", nil); len(o) != 1 {
		t.Fatalf("live group's offsets expired: %v", o)
	}
}

func TestCoordinator_DeleteGroupsAndOffsets(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("busy", 1)
	h.commit("busy", ids[0], gen, 3)
	h.c.Commit(CommitRequest{Group: "busy", Generation: gen, MemberID: ids[0],
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"other", 0}, Offset: 1}}})
	h.commit("idle", "", -1, 7)
	codes := h.c.DeleteGroups([]string{"busy", "idle", "ghost"})
	if codes["busy"] != kerr.NonEmptyGroup.Code || codes["idle"] != 0 || codes["ghost"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete codes: %v", codes)
	}
	if h.log.m.Group("idle") != nil {
		t.Fatal("deleted group still there")
	}
	code, per := h.c.DeleteOffsets("busy", []TopicPartition{{"t", 0}, {"other", 0}})
	if code != 0 || per[TopicPartition{"t", 0}] != kerr.GroupSubscribedToTopic.Code || per[TopicPartition{"other", 0}] != 0 {
		t.Fatalf("offset delete: %d %v", code, per)
	}
	offs := h.log.m.Offsets("busy")
	if _, ok := offs[TopicPartition{"other", 0}]; ok || len(offs) != 1 {
		t.Fatalf("offsets after delete: %v", offs)
	}
	if code, _ := h.c.DeleteOffsets("ghost", nil); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete offsets of unknown group: %d", code)
	}
}

// A new coordinator, on a replica that applied the same log, continues the
// generation: members heartbeat and commit without rejoining.
func TestCoordinator_FailoverContinuesGeneration(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	if h.commit("g", ids[0], gen, 5) != 0 {
		t.Fatal("commit")
	}
	h.log.refuse = true // the old leader is deposed
	if code := h.commit("g", ids[0], gen, 6); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on a deposed leader: %d", code)
	}
	h.c.Deactivate()
	if code := h.heartbeat("g", ids[0], gen); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat to an inactive coordinator: %d, want NOT_COORDINATOR", code)
	}

	replica := &fakeLog{m: NewMachine()}
	for _, e := range h.log.entries {
		if _, err := replica.m.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	replica.entries = h.log.entries
	cfg := h.c.cfg
	cfg.Machine, cfg.Propose = replica.m, replica.propose
	c2, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Activate(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	h.c, h.log = c2, replica
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen); code != 0 {
			t.Fatalf("heartbeat on the new coordinator: %d", code)
		}
	}
	if code := h.commit("g", ids[1], gen, 7); code != 0 {
		t.Fatalf("commit on the new coordinator: %d", code)
	}
	if g := replica.m.Group("g"); g.Generation != gen || g.Phase != PhaseStable {
		t.Fatalf("group on the new coordinator: gen %d phase %s", g.Generation, g.Phase)
	}
	// Fresh sessions: silence shorter than a session timeout from the
	// takeover removes nobody.
	h.clk.advance(9 * time.Second)
	c2.Tick()
	if n := len(replica.m.Group("g").Members); n != 3 {
		t.Fatalf("members after takeover tick: %d", n)
	}
}

func TestCoordinator_ListAndDescribe(t *testing.T) {
	h := newHarness(t, nil)
	h.stableGroup("b", 1)
	h.commit("a", "", -1, 1)
	list, code := h.c.List()
	if code != 0 || len(list) != 2 || list[0].Name != "a" || list[0].State != PhaseEmpty || list[1].State != PhaseStable {
		t.Fatalf("list: %+v", list)
	}
	d, _ := h.c.Describe("b")
	if len(d.Members) != 1 || d.Members[0].ClientID != "cl" || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe: %+v", d.Members)
	}
	if d, _ := h.c.Describe("zzz"); d.State != PhaseDead || d.Group != nil {
		t.Fatalf("describe unknown: %+v", d)
	}
}
