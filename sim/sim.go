package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/raftq/raftq/internal/vfs"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// Config shapes one simulated run.
type Config struct {
	Seed   uint64
	Nodes  int // node ids 1..Nodes
	Groups int // group ids 1..Groups, each replicated on every node
	// Partitions adds groups Groups+1..Groups+Partitions that run the real
	// partition.Replica on each node's simulated disk (a vfs.Mem), fed by
	// Kafka producers (two idempotent, one plain, per partition).
	Partitions int
	// ISRPartitions adds a topic of that many ISR-mode partitions, each on
	// every node: the real isr.Manager and isr.Partition in manual mode,
	// on the same disks, with group 0's real ISR rules (isr.go).
	ISRPartitions int
	// ISRNoFlush runs them with Kafka's default flush.messages (never
	// fsync), under which Kafka itself may lose acknowledged batches to
	// successive power losses (ISR-NOTES §2c).
	ISRNoFlush bool
	// MetadataGroups and OffsetGroups add groups after the partitions
	// that run the coordinator's real state machines, volatile as in the
	// broker: coordinator.Metadata (group 0's, fed the commands brokers
	// and the controller propose) and groups.Machine (a
	// __consumer_offsets partition's, fed what a group coordinator
	// proposes).
	MetadataGroups int
	OffsetGroups   int
	Ticks          int // ticks of faults and load before the final heal

	ProposeRate float64 // per group per tick
	CrashRate   float64 // per tick: crash one random node
	DownTicks   int     // how long a crashed node stays down (max)
	PartRate    float64 // per tick: start a partition
	PartTicks   int     // how long a partition lasts (max)
	DropRate    float64 // per envelope, outside the final phase
	DupRate     float64 // per envelope: delivered twice
	// CorruptRate is, per tick, the chance that one file on the disk of a
	// node that is down has bits flipped or is cut short (corrupt.go).
	CorruptRate float64
	MaxDelay    int // ticks an envelope may take; > 0 reorders
	// SkipCRCChecks is a planted bug: partition logs open with
	// UnsafeSkipCRCChecks, trusting what they find below their recovery
	// point.
	SkipCRCChecks bool
	// Transactions adds a transactional producer to every partition, raft
	// and ISR (txn.go): transactions of one to three batches, each ended
	// by a commit or abort marker, and late copies of markers.
	Transactions bool
	// UnnumberedMarkers is a planted bug: markers carry an earlier
	// binary's bare coordinator term instead of their transaction's
	// number, so a late copy cannot be told from a new marker.
	UnnumberedMarkers bool

	SnapshotEntries uint64 // raftgroup snapshot interval (small: exercises install)
	// AsyncStorageWrites runs the groups with raft's asynchronous storage
	// writes; their saves then complete a random number of ticks later.
	AsyncStorageWrites bool

	// Planted bugs, to prove the checker can fail. LieAboutSync makes
	// raft's stores acknowledge syncs without making anything durable;
	// DiskLiesAboutSync does the same to the partitions' disks;
	// ApplyTwice applies each toy entry twice; DropProducerID strips the
	// producer fields from every batch before the replica applies it (a
	// retry is then appended again); ServeBeforeCaughtUp lets a new
	// leader serve reads before it applied its own term's no-op.
	// SkipMetadataCommand (SkipOffsetCommand) makes node 1's metadata
	// (offsets) replicas skip every command at an index divisible by 3;
	// CommitGoesBack applies every member's offset commit at an index
	// divisible by 3 one below the offset it replaces, on every replica
	// alike.
	LieAboutSync        bool
	DiskLiesAboutSync   bool
	ApplyTwice          bool
	DropProducerID      bool
	ServeBeforeCaughtUp bool
	SkipMetadataCommand bool
	SkipOffsetCommand   bool
	CommitGoesBack      bool

	// Trace keeps a readable line per event in Result.Trace (slower;
	// for replaying one seed).
	Trace bool
}

// DefaultConfig returns a short, fault-heavy run: 3 nodes, 2 groups, 80
// ticks of load and faults, then a heal and a final check.
func DefaultConfig(seed uint64) Config {
	return Config{
		Seed: seed, Nodes: 3, Groups: 2, Partitions: 1, ISRPartitions: 1, Ticks: 80,
		ProposeRate: 0.4, CrashRate: 0.03, DownTicks: 25, PartRate: 0.03, PartTicks: 25,
		DropRate: 0.05, DupRate: 0.02, CorruptRate: 0.1, MaxDelay: 2, SnapshotEntries: 8,
		AsyncStorageWrites: seed%2 == 1, // half the seeds
		Transactions:       true,
	}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Groups < 1 || c.Partitions < 0 || c.ISRPartitions < 0 || c.MetadataGroups < 0 || c.OffsetGroups < 0 || c.Ticks < 0:
		return errors.New("sim: need nodes, groups and a non-negative tick count")
	case c.MaxDelay < 0 || c.DownTicks < 1 || c.PartTicks < 1:
		return errors.New("sim: delays and durations must be positive")
	case c.SnapshotEntries == 0:
		return errors.New("sim: SnapshotEntries must be positive")
	}
	return nil
}

// Result is the outcome of a run.
type Result struct {
	Seed        uint64
	TraceHash   uint64
	Violations  []string
	Ticks       int64
	Applied     int // entries applied, all replicas
	Acked       int // proposals acknowledged
	Crashes     int
	Appends     int      // batches appended to partition logs, all replicas
	Installs    int      // partition snapshots installed
	Corruptions int      // files damaged (Config.CorruptRate)
	Repairs     int      // partition logs refilled from a peer after damage
	Commands    int      // metadata and group commands applied for their proposer
	Refused     int      // of those, refused by the state machine (a topic that exists)
	Restores    int      // metadata and offsets replicas restored from a snapshot and checked against another's state
	Txns        int      // transactions ended by an acknowledged marker (Config.Transactions)
	LateCopies  int      // late copies of markers answered as duplicates
	Trace       []string // with Config.Trace: what happened, in order
}

// Err returns the violations as one error, or nil.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	msg := fmt.Sprintf("seed %d: %d invariant violations:\n  %s", r.Seed, len(r.Violations), strings.Join(r.Violations, "\n  "))
	if len(r.Trace) > 0 {
		msg += "\ntrace:\n  " + strings.Join(r.Trace, "\n  ")
	}
	return errors.New(msg)
}

// Sim drives a whole cluster of raftgroup Hosts in manual mode from one
// goroutine in virtual time.
type Sim struct {
	cfg     Config
	rng     *rand.Rand
	now     int64
	net     *network
	nodes   []*node
	chk     *checker
	pchk    *partChecker
	tchk    *txnChecker
	trace   hash.Hash64
	lines   []string // Config.Trace
	clients []*client
	// producers of the partition groups
	producers []*producer
	// ISR partitions: group 0 and the producers
	ctrl         *isrController
	isrProducers []*producer
	mach         *machines // metadata and offsets groups
	inPart       int64     // partition heals at this tick
	final        bool
	res          Result
}

type node struct {
	id        uint64
	host      *raftgroup.Host
	up        bool
	downUntil int64
	stores    map[uint64]*Store
	disk      *vfs.Mem                // the partitions' files, across incarnations
	parts     map[uint64]*partReplica // this incarnation's partition replicas
	offline   map[uint64]error        // partition replicas waiting for a repair, and why

	// The ISR side (isr.go): this incarnation's Manager and replicas, by
	// partition; how many starts it had; whether it must register again;
	// its broker epoch as last heard; fetches in flight by leader (the
	// tick each was sent); how far its committed batches were checked.
	isrM        *isr.Manager
	isrParts    []*isr.Partition
	isrInc      int
	isrRegister bool
	isrEpoch    uint64
	isrIndex    uint64 // group 0's index it last took
	fetching    map[uint64]int64
	isrSeen     map[int]int64
}

// Run executes one seeded run. The caller seeds crypto/rand (raft's
// election jitter) with testing/cryptotest.SetGlobalRandom beforehand;
// everything else derives from cfg.Seed.
func Run(cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), chk: newChecker(), trace: fnv.New64a()}
	s.pchk = newPartChecker(s.chk)
	s.tchk = newTxnChecker(s.chk)
	s.res.Seed = cfg.Seed
	s.net = &network{s: s, cut: map[[2]uint64]bool{}}
	for id := uint64(1); id <= uint64(cfg.Nodes); id++ {
		n := &node{id: id, stores: map[uint64]*Store{}, disk: newDisk(cfg.DiskLiesAboutSync)}
		for g := uint64(1); g <= uint64(s.groupCount()); g++ {
			n.stores[g] = &Store{LieAboutSync: cfg.LieAboutSync}
		}
		s.nodes = append(s.nodes, n)
	}
	s.newProducers()
	if cfg.ISRPartitions > 0 {
		s.newISRController()
		s.newISRProducers()
	}
	s.newMachines()
	for _, n := range s.nodes {
		if err := s.boot(n); err != nil {
			return s.res, err
		}
	}
	if !s.guard(func() {
		for i := 0; i < cfg.Ticks; i++ {
			s.faults()
			s.step(true)
		}
	}) {
		return s.result(), nil
	}
	var err error
	if !s.guard(func() { err = s.finish() }) {
		return s.result(), nil
	}
	if err != nil {
		return s.res, err
	}
	return s.result(), nil
}

// guard runs f and turns a panic (raft panics when it finds its log
// corrupted, truncated or lost) into a violation that ends the run.
func (s *Sim) guard(f func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s.chk.fail("panic at tick %d: %v", s.now, r)
			ok = false
		}
	}()
	f()
	return true
}

func (s *Sim) result() Result {
	s.res.TraceHash = s.trace.Sum64()
	s.res.Appends = s.pchk.appends
	s.res.Trace = s.lines
	s.res.Violations = s.chk.violations
	s.res.Ticks = s.now
	return s.res
}

func (s *Sim) node(id uint64) *node { return s.nodes[id-1] }

func (s *Sim) hostConfig(n *node) raftgroup.Config {
	c := raftgroup.DefaultConfig()
	c.NodeID = n.id
	c.Manual = true
	c.Transport = &transport{n: s.net, from: n.id}
	c.ElectionTicks, c.HeartbeatTicks = electionTicks, 1
	c.QuiesceAfterTicks, c.KeepaliveTicks, c.PeerTimeoutTicks = 6, 2, 8
	c.SnapshotEntries, c.SnapshotCatchUpEntries = s.cfg.SnapshotEntries, 2
	c.AsyncStorageWrites = s.cfg.AsyncStorageWrites
	c.NewStorage = func(group uint64, _ string) (raftgroup.Storage, error) { return n.stores[group], nil }
	c.Fatal = func(err error) { s.chk.fail("node %d fatal: %s", n.id, err) }
	return c
}

// electionTicks is every simulated node's raft election timeout.
const electionTicks = 10

// createGroup starts group g on host h with state machine sm.
func (s *Sim) createGroup(n *node, h *raftgroup.Host, g uint64, sm raftgroup.StateMachine) error {
	var peers []uint64
	for _, m := range s.nodes {
		peers = append(peers, m.id)
	}
	gc := raftgroup.GroupConfig{ID: g, Peers: peers, StateMachine: sm}
	gc.ForwardProposals, gc.AlwaysFsync = s.isMetadata(g), s.isMetadata(g) // as the controller opens group 0
	if preferred := peers[int(g)%len(peers)]; preferred != n.id {
		// As the broker does: the others hold a new group's first
		// election for one replica (ignored once a store holds state).
		gc.HoldElectionTicks = 2 * electionTicks
	}
	_, err := h.CreateGroup(gc)
	return err
}

// boot starts a node's host and groups from its stores.
func (s *Sim) boot(n *node) error {
	h, err := raftgroup.NewHost(s.hostConfig(n))
	if err != nil {
		return err
	}
	n.parts, n.offline = map[uint64]*partReplica{}, map[uint64]error{}
	for g := uint64(1); g <= uint64(s.groupCount()); g++ {
		var sm raftgroup.StateMachine
		if s.isPartition(g) {
			r, err := s.openPartition(n, g)
			var gap *partition.GapError
			switch {
			case errors.As(err, &gap):
				// Damaged batches raft no longer holds, and no peer could
				// refill them yet: offline, tried again every tick
				// (retryOffline), as the broker's reconcile does.
				n.offline[g] = err
				s.note("node %d partition %d: offline: %s", n.id, g, err)
				continue
			case err != nil:
				// A replica that cannot open is a finding, not the end of
				// the run: the node runs on without it, and the final
				// checks report the missing replica.
				s.chk.fail("node %d partition %d: cannot open at tick %d: %s", n.id, g, s.now, err)
				continue
			}
			n.parts[g], sm = r, r
		} else if sm = s.openMachine(n, g); sm == nil {
			toy := newStateMachine(n.id, g, s.chk)
			toy.ApplyTwice = s.cfg.ApplyTwice
			sm = toy
		}
		if !s.isPartition(g) {
			if err := s.createGroup(n, h, g, sm); err != nil {
				return fmt.Errorf("sim: node %d group %d: %w", n.id, g, err)
			}
			continue
		}
		s.startPartition(n, h, g, n.parts[g])
	}
	n.host, n.up = h, true
	n.isrSeen = map[int]int64{}
	s.bootISR(n)
	s.traceEvent("boot", n.id)
	s.note("node %d starts (partitions open: %d)", n.id, len(n.parts))
	return nil
}

// crash stops a node abruptly: each store keeps a random prefix of its
// unsynced writes, and the state machines are gone.
func (s *Sim) crash(n *node) {
	for g := uint64(1); g <= uint64(s.groupCount()); g++ {
		st := n.stores[g]
		keep := s.rng.IntN(st.Pending() + 1)
		st.Crash(keep)
		s.chk.onCrash(n.id, g)
	}
	n.disk.Crash(s.rng) // the partitions' open files are dead from here
	n.parts = nil
	s.crashISR(n)
	n.host.Close()
	n.up = false
	n.downUntil = s.now + 1 + int64(s.rng.IntN(s.cfg.DownTicks))
	s.res.Crashes++
	s.traceEvent("crash", n.id)
	s.note("node %d crashes: unsynced raft writes and disk writes lost, down until t%d", n.id, n.downUntil)
}

func (s *Sim) faults() {
	for _, n := range s.nodes {
		if !n.up && s.now >= n.downUntil {
			if err := s.boot(n); err != nil {
				s.chk.fail("restart node %d: %s", n.id, err)
			}
		}
	}
	if s.rng.Float64() < s.cfg.CrashRate {
		if n := s.nodes[s.rng.IntN(len(s.nodes))]; n.up && s.upCount() == len(s.nodes) {
			s.crash(n)
		}
	}
	s.corruptSome()
	s.retryOffline()
	if s.inPart > 0 && s.now >= s.inPart {
		s.heal()
	} else if s.inPart == 0 && s.rng.Float64() < s.cfg.PartRate {
		s.partition()
	}
}

func (s *Sim) upCount() int {
	c := 0
	for _, n := range s.nodes {
		if n.up {
			c++
		}
	}
	return c
}

// partition isolates one random node from the others, sometimes only in
// one direction.
func (s *Sim) partition() {
	victim := uint64(s.rng.IntN(len(s.nodes)) + 1)
	oneWay := s.rng.IntN(3) == 0
	for _, n := range s.nodes {
		if n.id == victim {
			continue
		}
		s.net.cut[[2]uint64{victim, n.id}] = true
		if !oneWay {
			s.net.cut[[2]uint64{n.id, victim}] = true
		}
	}
	s.inPart = s.now + 1 + int64(s.rng.IntN(s.cfg.PartTicks))
	s.traceEvent("partition", victim)
	s.note("node %d cut off from the others (one way: %v) until t%d", victim, oneWay, s.inPart)
}

func (s *Sim) heal() {
	clear(s.net.cut)
	s.inPart = 0
	s.traceEvent("heal", 0)
	s.note("network healed")
}

func (s *Sim) dupRate() float64 {
	if s.final {
		return 0
	}
	return s.cfg.DupRate
}

func (s *Sim) dropRate() float64 {
	if s.final {
		return 0
	}
	return s.cfg.DropRate
}

// step is one virtual tick: tick every live host, deliver what is due,
// offer load, process every host, and check.
func (s *Sim) step(load bool) {
	s.now++
	for _, n := range s.nodes {
		if n.up {
			n.host.Tick()
		}
	}
	s.net.deliverDue()
	if load {
		s.offerLoad()
	}
	for _, n := range s.nodes {
		if n.up {
			s.syncSome(n)
			n.host.Process()
		}
	}
	s.stepISR(load)
	s.observe()
}

// syncSome completes the in-flight writes of a random subset of a node's
// stores (with AsyncStorageWrites; otherwise every sync was inline).
func (s *Sim) syncSome(n *node) {
	if !s.cfg.AsyncStorageWrites {
		return
	}
	for g := uint64(1); g <= uint64(s.groupCount()); g++ {
		if s.rng.IntN(3) == 0 {
			n.stores[g].Sync()
		}
	}
}

// observe records leaders per term and finished proposals.
func (s *Sim) observe() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for _, g := range n.host.Groups() {
			if st := g.Status(); st.IsLeader() {
				if s.cfg.Trace {
					if _, seen := s.chk.leaders[[2]uint64{st.Group, st.Term}]; !seen {
						s.note("group %d: node %d leads term %d (commit %d, applied %d)", st.Group, st.Node, st.Term, st.Commit, st.Applied)
					}
				}
				s.chk.onLeader(st.Group, st.Term, st.Node)
			}
		}
	}
	s.pollClients()
	s.pollProducers()
	s.pollMachines()
	s.observeServing()
}

func (s *Sim) traceEvent(what string, id uint64) {
	s.trace.Write([]byte(what))
	s.traceU64(uint64(s.now), id)
}

// note adds a readable line to the trace (Config.Trace only).
func (s *Sim) note(format string, args ...any) {
	if s.cfg.Trace {
		s.lines = append(s.lines, fmt.Sprintf("t%-4d ", s.now)+fmt.Sprintf(format, args...))
	}
}

func (s *Sim) traceU64(vs ...uint64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], v)
		s.trace.Write(b[:])
	}
}

func (s *Sim) traceMsg(f *inflight) {
	m := f.env.Msg
	s.traceU64(uint64(s.now), f.from, f.to, f.env.Group, uint64(m.GetType()), m.GetTerm(), m.GetIndex(), m.GetCommit(), uint64(len(m.GetEntries())))
}

func (s *Sim) traceSnap(f *inflight, err error) {
	ok := uint64(0)
	if err == nil {
		ok = 1
	}
	s.traceU64(uint64(s.now), f.from, f.to, f.env.Group, f.env.Msg.GetSnapshot().GetMetadata().GetIndex(), ok)
}
