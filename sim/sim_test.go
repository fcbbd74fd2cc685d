package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"
)

var (
	seedFlag  = flag.Int64("seed", -1, "run only this seed (replays a failure)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestSim runs (0: 2500, or 60 under the race detector)")
	fromFlag  = flag.Int64("from", 1, "TestSim's first seed (split a -long run across processes)")
	longFlag  = flag.Bool("long", false, "TestSim runs 100,000 seeds")
	nodesFlag = flag.Int("nodes", 3, "TestSim's cluster size")
	traceFlag = flag.Bool("events", false, "keep a readable trace of each run; a failure prints it")
)

// runSeed seeds crypto/rand, which raft v3.7.0 draws its randomized
// election timeout from (crypto/rand.Int in raft.go's lockedRand), and
// runs one simulation.
func runSeed(t *testing.T, cfg Config) Result {
	t.Helper()
	cryptotest.SetGlobalRandom(t, cfg.Seed)
	res, err := Run(cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	return res
}

func replay(seed uint64, nodes int) string {
	return fmt.Sprintf("go test ./sim -run 'TestSim$' -seed %d -nodes %d -events -v", seed, nodes)
}

// TestSim runs many seeds of a fault-heavy simulation and checks raft's
// safety invariants on our raftgroup code. A failure prints its seed and
// the command that replays it.
func TestSim(t *testing.T) {
	first, n := uint64(*fromFlag), seedCount()
	if *seedFlag >= 0 {
		first, n = uint64(*seedFlag), 1
	}
	start := time.Now()
	var acked, applied, crashes, appends, installs, txns, copies int
	for seed := first; seed < first+uint64(n); seed++ {
		cfg := DefaultConfig(seed)
		cfg.Trace, cfg.Nodes = *traceFlag, *nodesFlag
		res := runSeed(t, cfg)
		if err := res.Err(); err != nil {
			t.Fatalf("%v\nreplay: %s", err, replay(seed, cfg.Nodes))
		}
		acked, applied, crashes, appends = acked+res.Acked, applied+res.Applied, crashes+res.Crashes, appends+res.Appends
		installs, txns, copies = installs+res.Installs, txns+res.Txns, copies+res.LateCopies
		if *seedFlag >= 0 && *traceFlag {
			t.Logf("seed %d trace:\n  %s", seed, strings.Join(res.Trace, "\n  "))
		}
		if *seedFlag >= 0 {
			t.Logf("seed %d: trace %016x, %d ticks, %d acked, %d applied, %d crashes", seed, res.TraceHash, res.Ticks, res.Acked, res.Applied, res.Crashes)
		}
	}
	t.Logf("%d seeds in %s: %d proposals acknowledged, %d entries applied, %d batches appended to partition logs, %d partition snapshots installed, %d transactions ended (%d late marker copies refused), %d crashes",
		n, time.Since(start).Round(time.Millisecond), acked, applied, appends, installs, txns, copies, crashes)
}

// seedCount is how many seeds TestSim runs: 2,500 by default (about 20 s
// on one core), 60 under the race detector, which slows the simulator
// twentyfold (.ci/run runs the package again without it, the 2,500 seeds
// and the planted bugs).
func seedCount() int {
	switch {
	case *seedsFlag > 0:
		return *seedsFlag
	case *longFlag:
		return 100_000
	case raceEnabled:
		return 60
	}
	return 2500
}

// TestSim_FiveNodes runs a tenth of TestSim's seeds on five nodes: raft
// majorities of three, an ISR of five with min.insync.replicas 2.
func TestSim_FiveNodes(t *testing.T) {
	n := max(seedCount()/10, 1)
	for seed := uint64(1); seed <= uint64(n); seed++ {
		cfg := DefaultConfig(seed)
		cfg.Nodes = 5
		if err := runSeed(t, cfg).Err(); err != nil {
			t.Fatalf("%v\nreplay: %s", err, replay(seed, 5))
		}
	}
}

func TestSim_Deterministic(t *testing.T) {
	for _, seed := range []uint64{3, 42} {
		a := runSeed(t, DefaultConfig(seed))
		b := runSeed(t, DefaultConfig(seed))
		if a.TraceHash != b.TraceHash || a.Acked != b.Acked || a.Applied != b.Applied {
			t.Fatalf("seed %d ran twice: trace %016x vs %016x (acked %d/%d, applied %d/%d)",
				seed, a.TraceHash, b.TraceHash, a.Acked, b.Acked, a.Applied, b.Applied)
		}
	}
	if a, b := runSeed(t, DefaultConfig(5)), runSeed(t, DefaultConfig(6)); a.TraceHash == b.TraceHash {
		t.Fatalf("seeds 5 and 6 produced the same trace %016x: the seed does not steer the run", a.TraceHash)
	}
}

// plantedBug runs seeds with a bug until the checker reports a
// violation containing want (raft's own panics on a corrupted log do not
// count: the checker itself must see the damage).
func plantedBug(t *testing.T, name, want string, plant func(*Config), seeds int) {
	t.Helper()
	plantedBugOn(t, DefaultConfig, name, want, plant, seeds)
}

// plantedBugOn is plantedBug on the configurations base makes.
func plantedBugOn(t *testing.T, base func(uint64) Config, name, want string, plant func(*Config), seeds int) {
	t.Helper()
	if raceEnabled {
		t.Skip("planted bugs run without the race detector (.ci/run's sim step): it makes their failing runs minutes long")
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := base(seed)
		plant(&cfg)
		res := runSeed(t, cfg)
		for _, v := range res.Violations {
			if strings.Contains(v, want) {
				t.Logf("%s caught at seed %d: %s", name, seed, v)
				return
			}
		}
	}
	t.Fatalf("the checker never noticed %s in %d seeds", name, seeds)
}

// plantedBugs are the planted bugs, each with the violation that shows
// it was caught and how many seeds may pass first (TestSim's count or
// fewer, so CI's seeds would catch it too).
var plantedBugs = []struct {
	name, want string
	plant      func(*Config)
	seeds      int
}{
	{"a raft storage that acknowledges unsynced writes", "changed", func(c *Config) { c.LieAboutSync, c.CrashRate = true, 0.1 }, 200},
	{"an entry applied twice", "twice", func(c *Config) { c.ApplyTwice = true }, 5},
	{"an acknowledged batch lost with the raft log", "acknowledged batch", func(c *Config) { c.LieAboutSync, c.CrashRate = true, 0.1 }, 300},
	{"replicas with different bytes at one offset", "different bytes", func(c *Config) { c.LieAboutSync, c.CrashRate = true, 0.1 }, 300},
	{"a retried idempotent batch appended twice", "appended twice", func(c *Config) { c.DropProducerID = true }, 300},
	{"a leader serving before it caught up", "went backwards", func(c *Config) { c.ServeBeforeCaughtUp, c.CrashRate = true, 0.1 }, 300},
	{"a partition disk that acknowledges unsynced writes", "cannot", func(c *Config) { c.DiskLiesAboutSync, c.CrashRate = true, 0.1 }, 300},
	{"an ISR leader serving before it caught up", "partition 1000000: node", func(c *Config) {
		c.ServeBeforeCaughtUp, c.Partitions, c.CrashRate = true, 0, 0.1
	}, 300},
	// Damaged files (Config.CorruptRate, on by default) opened without
	// the CRC checks that find them: damage is served and spread. Only a
	// segment without transactions is ever trusted unread (partition's
	// openSegment), so this runs without the transactional producer.
	{"partition logs trusted without their CRC checks", "differs", func(c *Config) {
		c.SkipCRCChecks, c.CorruptRate, c.Transactions = true, 0.2, false
	}, 500},
	// Not a bug of ours: Kafka's default flush.messages (never fsync) loses
	// acknowledged batches when the replicas holding them lose power one
	// after another (ISR-NOTES §2c); the checker must see it.
	// Markers without their transaction's number: a late copy of one
	// ends the producer's next transaction.
	{"markers that cannot be told from their late copies", "late copy", func(c *Config) { c.UnnumberedMarkers = true }, 100},
	{"ISR without fsync under successive power losses", "acknowledged batch", func(c *Config) {
		c.ISRNoFlush, c.Partitions, c.CrashRate = true, 0, 0.1
	}, 400},
}

func TestSim_CatchesPlantedBugs(t *testing.T) {
	for _, b := range plantedBugs {
		t.Run(b.name, func(t *testing.T) { plantedBug(t, b.name, b.want, b.plant, b.seeds) })
	}
}

// BenchmarkSeeds measures whole seeds of DefaultConfig per second: toy
// groups alone, with the raft partition, and with the ISR partition too,
// so each one's cost is measured in one run:
//
//	go test ./sim -run '^$' -bench Seeds -benchtime 200x
func BenchmarkSeeds(b *testing.B) {
	for _, c := range []struct {
		parts, isr int
		txns       bool
	}{{0, 0, false}, {1, 0, false}, {1, 1, false}, {1, 1, true}} {
		b.Run(fmt.Sprintf("partitions=%d/isr=%d/txns=%v", c.parts, c.isr, c.txns), func(b *testing.B) {
			for i := range b.N {
				cfg := DefaultConfig(uint64(i) + 1) // crypto/rand unseeded: timing needs no replay
				cfg.Partitions, cfg.ISRPartitions, cfg.Transactions = c.parts, c.isr, c.txns
				if _, err := Run(cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "seeds/s")
		})
	}
}

// foundSeeds are seeds past TestSim's CI count that once failed, each
// with what it found. Any change to the simulated code may send a seed
// elsewhere, so they guard loosely; the -long run is the real net.
var foundSeeds = []struct {
	seed  uint64
	found string
	txns  bool // found with Config.Transactions
}{
	{6649, "a replica whose disk cut synced bytes kept its ELR place", false},
	{9862, "a damaged staged snapshot restored with a hole", false},
	{17109, "an epoch regression cut after the raised batch, not before it", false},
	{3478, "a log end report dropped by a fence was never made again", false},
	{31650, "a restarted last known leader whose disk cut its tail led again", false},
	{6587, "unclean recovery chose a replica that lost data, which resigned, and waited for it", false},
	{54813, "a log end report was not repeated after a newer state lacked it", false},
	{3245, "an ISR leader answered a marker's copy before the marker was replicated, and it was lost", true},
	{39845, "a staged snapshot whose checkpoint file was damaged could not be restored", true},
}

// TestSim_FoundSeeds replays foundSeeds.
func TestSim_FoundSeeds(t *testing.T) {
	for _, f := range foundSeeds {
		cfg := DefaultConfig(f.seed)
		cfg.Transactions = f.txns // as it was found: the producer changes the run
		if err := runSeed(t, cfg).Err(); err != nil {
			t.Errorf("seed %d (once: %s): %v\nreplay: %s", f.seed, f.found, err, replay(f.seed, cfg.Nodes))
		}
	}
}
