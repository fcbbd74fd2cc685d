package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// Consumer groups end to end: real raftq processes, real franz-go and
// IBM/sarama group consumers, consumer processes killed with SIGKILL, and
// the coordinating node killed with SIGKILL. The subtests share one
// cluster to stay within the CI budget; each uses its own group and topic.
func TestE2E_Groups(t *testing.T) {
	c := e2eCluster(t, 3, "--group-min-session-timeout", "1s", "--group-initial-rebalance-delay", "1s")
	t.Run("MixedClientsSharePartitions", func(t *testing.T) { grpMixedClients(t, c) })
	t.Run("CLI", func(t *testing.T) { grpCLIChecks(t, c) })
	t.Run("ConsumerKill", func(t *testing.T) { grpConsumerKill(t, c) })
	t.Run("StaticMemberRestart", func(t *testing.T) { grpStaticRestart(t, c) })
	t.Run("CoordinatorKill", func(t *testing.T) { grpCoordinatorKill(t, c) })
}

func grpCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func grpCreateTopic(t *testing.T, c *chaos.Cluster, name string, parts int32) {
	t.Helper()
	adm := kadm.NewClient(e2eClient(t, c))
	res, err := adm.CreateTopic(grpCtx(t, 30*time.Second), parts, 3, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// grpProduce writes n records to every partition ("p<i>-<j>") and
// returns how many it wrote.
func grpProduce(t *testing.T, c *chaos.Cluster, topic string, parts int32, n int, tag string) int {
	t.Helper()
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for j := 0; j < n; j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-p%d-%d", tag, p, j))})
		}
	}
	if err := cl.ProduceSync(grpCtx(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return len(recs)
}

// grpDescribe describes a group; ok is false while it cannot be.
func grpDescribe(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, bool) {
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil || dgs[group].Err != nil {
		return kadm.DescribedGroup{}, false
	}
	return dgs[group], true
}

// grpOwners maps each assigned partition of topic to its member.
func grpOwners(dg kadm.DescribedGroup, topic string) map[int32]string {
	out := map[int32]string{}
	for _, m := range dg.Members {
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				if at.Topic == topic {
					for _, p := range at.Partitions {
						out[p] = m.MemberID
					}
				}
			}
		}
	}
	return out
}

// grpSeen collects consumed records by consumer.
type grpSeen struct {
	mu     sync.Mutex
	values map[string]map[string]bool // consumer -> value
}

func (s *grpSeen) add(consumer, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]map[string]bool{}
	}
	if s.values[consumer] == nil {
		s.values[consumer] = map[string]bool{}
	}
	s.values[consumer][value] = true
}

// holds reports which consumers saw value.
func (s *grpSeen) holders(value string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for c, vs := range s.values {
		if vs[value] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func grpMixedClients(t *testing.T, c *chaos.Cluster) {
	const topic, group, parts = "grp-mixed", "mixed", 6
	grpCreateTopic(t, c, topic, parts)
	grpProduce(t, c, topic, parts, 20, "before")
	ctx, cancel := context.WithCancel(grpCtx(t, 90*time.Second))
	defer cancel()
	seen := &grpSeen{}
	clientOf := map[string]string{} // member client id -> consumer name
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("franz-%d", i)
		clientOf[name] = name
		cl := e2eClient(t, c, kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen.add(name, string(r.Value)) })
			}
		}()
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("sarama-%d", i)
		clientOf[name] = name
		wg.Add(1)
		go func() {
			defer wg.Done()
			grpSaramaConsume(ctx, t, c, name, group, topic, seen)
		}()
	}
	defer wg.Wait()
	defer cancel()

	adm := kadm.NewClient(e2eClient(t, c))
	var owners map[int32]string
	var dg kadm.DescribedGroup
	waitFor(t, 60*time.Second, "6 members (3 franz-go, 3 sarama) with one partition each", func(ctx context.Context) bool {
		var ok bool
		if dg, ok = grpDescribe(ctx, adm, group); !ok || dg.State != "Stable" || len(dg.Members) != 6 {
			return false
		}
		owners = grpOwners(dg, topic)
		distinct := map[string]bool{}
		for _, m := range owners {
			distinct[m] = true
		}
		return len(owners) == parts && len(distinct) == parts
	})
	memberClient := map[string]string{}
	for _, m := range dg.Members {
		memberClient[m.MemberID] = m.ClientID
	}
	grpProduce(t, c, topic, parts, 10, "after")
	waitFor(t, 60*time.Second, "every record consumed", func(context.Context) bool {
		for p := 0; p < parts; p++ {
			for j := 0; j < 20; j++ {
				if len(seen.holders(fmt.Sprintf("before-p%d-%d", p, j))) == 0 {
					return false
				}
			}
			for j := 0; j < 10; j++ {
				if len(seen.holders(fmt.Sprintf("after-p%d-%d", p, j))) == 0 {
					return false
				}
			}
		}
		return true
	})
	// Records produced once the group was stable went to the partition's
	// owner, and to no one else.
	for p := int32(0); p < parts; p++ {
		want := clientOf[memberClient[owners[p]]]
		for j := 0; j < 10; j++ {
			if got := seen.holders(fmt.Sprintf("after-p%d-%d", p, j)); !slices.Equal(got, []string{want}) {
				t.Errorf("after-p%d-%d consumed by %v, want only %s (the partition's owner)", p, j, got, want)
			}
		}
	}
	kinds := map[string]int{}
	for _, m := range dg.Members {
		kinds[strings.Split(m.ClientID, "-")[0]]++
	}
	if kinds["franz"] != 3 || kinds["sarama"] != 3 {
		t.Errorf("members by client: %v", kinds)
	}
}

// grpSaramaConsume runs one sarama ConsumerGroup member until ctx ends.
func grpSaramaConsume(ctx context.Context, t *testing.T, c *chaos.Cluster, name, group, topic string, seen *grpSeen) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(seeds(c), group, cfg)
	if err != nil {
		t.Errorf("sarama consumer group: %v", err)
		return
	}
	defer cg.Close()
	h := grpSaramaHandler{name: name, seen: seen}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Logf("%s: consume: %v", name, err)
			time.Sleep(100 * time.Millisecond) // sarama's own retry pace; nothing to await
		}
	}
}

type grpSaramaHandler struct {
	name string
	seen *grpSeen
}

func (grpSaramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (grpSaramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h grpSaramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.seen.add(h.name, string(m.Value))
		s.MarkMessage(m, "")
	}
	return nil
}

// ---- consumer processes ----

// grpChildEnv turns this test binary into a group consumer process
// (grpConsumerChild), so that a test can kill a consumer with SIGKILL.
const grpChildEnv = "RAFTQ_E2E_GROUP_CONSUMER"

// grpChildSpec configures a consumer process.
type grpChildSpec struct {
	Brokers   []string `json:"brokers"`
	Group     string   `json:"group"`
	Topic     string   `json:"topic"`
	ClientID  string   `json:"client_id"`
	SessionMs int      `json:"session_ms"`
	// InstanceID, if set, makes the consumer a static member.
	InstanceID string `json:"instance_id,omitempty"`
}

// init runs a re-executed test binary as a consumer process before
// TestMain would build raftq: the one place this package needs init.
func init() {
	if spec := os.Getenv(grpChildEnv); spec != "" {
		os.Exit(grpConsumerChild(spec))
	}
}

// grpConsumerChild consumes with franz-go (cooperative-sticky, its
// default balancer) and prints "rec <partition> <offset>" per record; it
// commits after each poll and runs until killed.
func grpConsumerChild(specJSON string) int {
	var spec grpChildSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(spec.Brokers...), kgo.ClientID(spec.ClientID), kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(spec.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(time.Duration(spec.SessionMs) * time.Millisecond), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { say("assigned %v", m[spec.Topic]) })}
	if spec.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(spec.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	say("started")
	for {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { say("rec %d %d", r.Partition, r.Offset) })
		_ = cl.CommitUncommittedOffsets(ctx)
	}
}

// grpChild is a running consumer process.
type grpChild struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	recs map[int32]map[int64]bool
}

func grpStartChild(t *testing.T, c *chaos.Cluster, spec grpChildSpec) *grpChild {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), grpChildEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &grpChild{name: spec.ClientID, cmd: cmd, recs: map[int32]map[int64]bool{}}
	t.Cleanup(func() { ch.kill() })
	go ch.read(stdout)
	return ch
}

func (ch *grpChild) read(r interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "rec" {
			p, _ := strconv.Atoi(f[1])
			off, _ := strconv.ParseInt(f[2], 10, 64)
			ch.mu.Lock()
			if ch.recs[int32(p)] == nil {
				ch.recs[int32(p)] = map[int64]bool{}
			}
			ch.recs[int32(p)][off] = true
			ch.mu.Unlock()
		}
	}
}

func (ch *grpChild) has(p int32, off int64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.recs[p][off]
}

// kill sends SIGKILL: no LeaveGroup, no last commit.
func (ch *grpChild) kill() {
	if ch.cmd.ProcessState == nil {
		_ = ch.cmd.Process.Kill()
		_ = ch.cmd.Wait()
	}
}

func grpConsumerKill(t *testing.T, c *chaos.Cluster) {
	const topic, group, parts = "grp-kill", "killable", 6
	grpCreateTopic(t, c, topic, parts)
	var kids []*grpChild
	for i := 0; i < 3; i++ {
		kids = append(kids, grpStartChild(t, c, grpChildSpec{Brokers: seeds(c), Group: group, Topic: topic,
			ClientID: fmt.Sprintf("child-%d", i), SessionMs: 3000}))
	}
	adm := kadm.NewClient(e2eClient(t, c))
	var dg kadm.DescribedGroup
	waitFor(t, 60*time.Second, "3 consumer processes with 2 partitions each", func(ctx context.Context) bool {
		var ok bool
		if dg, ok = grpDescribe(ctx, adm, group); !ok || dg.State != "Stable" || len(dg.Members) != 3 {
			return false
		}
		count := map[string]int{}
		for _, m := range grpOwners(dg, topic) {
			count[m]++
		}
		return len(count) == 3 && count[dg.Members[0].MemberID] == 2 && count[dg.Members[1].MemberID] == 2
	})
	victim := kids[0]
	var victimID string
	var victimParts []int32
	owners := grpOwners(dg, topic)
	for _, m := range dg.Members {
		if m.ClientID == victim.name {
			victimID = m.MemberID
		}
	}
	for p, m := range owners {
		if m == victimID {
			victimParts = append(victimParts, p)
		}
	}
	killed := time.Now()
	victim.kill()
	waitFor(t, 60*time.Second, "the survivors own every partition", func(ctx context.Context) bool {
		dg, ok := grpDescribe(ctx, adm, group)
		if !ok || dg.State != "Stable" || len(dg.Members) != 2 {
			return false
		}
		owners = grpOwners(dg, topic)
		return len(owners) == parts
	})
	moved := time.Since(killed)
	t.Logf("rebalanced %s after kill -9 of a consumer (session timeout 3s)", moved.Round(time.Millisecond))
	for _, p := range victimParts {
		if owners[p] == victimID {
			t.Errorf("partition %d still owned by the killed member", p)
		}
	}
	// Records written now reach the survivors, the killed one's
	// partitions included.
	grpProduce(t, c, topic, parts, 5, "late")
	ends := grpEnds(t, c, topic)
	waitFor(t, 60*time.Second, "the survivors consume the killed consumer's partitions", func(context.Context) bool {
		for _, p := range victimParts {
			last := ends[p] - 1
			if !kids[1].has(p, last) && !kids[2].has(p, last) {
				return false
			}
		}
		return true
	})
}

// grpEnds lists each partition's end offset (retrying through leader
// elections, as endOffset does).
func grpEnds(t *testing.T, c *chaos.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx := grpCtx(t, 30*time.Second)
	cl := e2eClient(t, c)
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range topics[topic].Partitions.Numbers() {
		out[p] = endOffset(ctx, t, cl, topic, p).Offset
	}
	return out
}

// grpCoordinatorOf asks the cluster which node coordinates group.
func grpCoordinatorOf(ctx context.Context, cl *kgo.Client, group string) (int, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
		return 0, fmt.Errorf("find coordinator: %+v", resp.Coordinators)
	}
	return int(resp.Coordinators[0].NodeID), nil
}

// grpStaticRestart kills a static member (group.instance.id) with SIGKILL
// and starts a new process with the same instance id at once. With a 30 s
// session timeout a dynamic member's partitions would stay with the dead
// member until it timed out; the static one is replaced on its rejoin
// (KIP-345): the same instances own the same partitions, the other
// members keep their member ids, and the new process consumes its
// instance's partitions well inside the session timeout.
func grpStaticRestart(t *testing.T, c *chaos.Cluster) {
	const topic, group, parts = "grp-static", "static", 6
	grpCreateTopic(t, c, topic, parts)
	spec := func(i int) grpChildSpec {
		return grpChildSpec{Brokers: seeds(c), Group: group, Topic: topic, ClientID: fmt.Sprintf("static-%d", i),
			SessionMs: 30000, InstanceID: fmt.Sprintf("inst-%d", i)}
	}
	kids := []*grpChild{grpStartChild(t, c, spec(0)), grpStartChild(t, c, spec(1)), grpStartChild(t, c, spec(2))}
	adm := kadm.NewClient(e2eClient(t, c))
	byInstance := func(dg kadm.DescribedGroup) (map[int32]string, map[string]string) {
		ids, owners := map[string]string{}, map[int32]string{}
		for _, m := range dg.Members {
			if m.InstanceID != nil {
				ids[m.MemberID] = *m.InstanceID
			}
		}
		for p, id := range grpOwners(dg, topic) {
			owners[p] = ids[id]
		}
		memberOf := map[string]string{}
		for id, inst := range ids {
			memberOf[inst] = id
		}
		return owners, memberOf
	}
	var before map[int32]string
	var membersBefore map[string]string
	waitFor(t, 60*time.Second, "3 static members with 2 partitions each", func(ctx context.Context) bool {
		dg, ok := grpDescribe(ctx, adm, group)
		if !ok || dg.State != "Stable" || len(dg.Members) != 3 {
			return false
		}
		before, membersBefore = byInstance(dg)
		count := map[string]int{}
		for _, inst := range before {
			count[inst]++
		}
		return len(before) == parts && count["inst-0"] == 2 && count["inst-1"] == 2 && count["inst-2"] == 2
	})
	kids[0].kill()
	restarted := time.Now()
	kids[0] = grpStartChild(t, c, spec(0))
	grpProduce(t, c, topic, parts, 3, "static")
	ends := grpEnds(t, c, topic)
	var mine []int32
	for p, inst := range before {
		if inst == "inst-0" {
			mine = append(mine, p)
		}
	}
	waitFor(t, 20*time.Second, "the restarted instance consumes its partitions", func(context.Context) bool {
		for _, p := range mine {
			if !kids[0].has(p, ends[p]-1) {
				return false
			}
		}
		return true
	})
	t.Logf("static member back on its partitions %s after restart (session timeout 30s)", time.Since(restarted).Round(time.Millisecond))
	dg, ok := grpDescribe(grpCtx(t, 10*time.Second), adm, group)
	if !ok || len(dg.Members) != 3 {
		t.Fatalf("group after the restart: %+v", dg)
	}
	after, membersAfter := byInstance(dg)
	for p, inst := range before {
		if after[p] != inst {
			t.Errorf("partition %d moved from %s to %s", p, inst, after[p])
		}
	}
	for _, inst := range []string{"inst-1", "inst-2"} {
		if membersAfter[inst] != membersBefore[inst] {
			t.Errorf("%s changed member id %s -> %s: it was rebalanced", inst, membersBefore[inst], membersAfter[inst])
		}
	}
	if membersAfter["inst-0"] == membersBefore["inst-0"] {
		t.Errorf("the restarted instance kept the dead process's member id %s", membersBefore["inst-0"])
	}
}
