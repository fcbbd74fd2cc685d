package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/coordinator/groups"
)

// machinesConfig is DefaultConfig with one metadata group and one offsets
// group.
func machinesConfig(seed uint64) Config {
	cfg := DefaultConfig(seed)
	cfg.MetadataGroups, cfg.OffsetGroups = 1, 1
	return cfg
}

// TestSim_StateMachines runs seeds with the coordinator's real state
// machines: the metadata of group 0 and a __consumer_offsets partition.
func TestSim_StateMachines(t *testing.T) {
	first, n := uint64(1), max(seedCount()/5, 1) // 500 by default, 12 under -race
	if *seedFlag >= 0 {
		first, n = uint64(*seedFlag), 1
	}
	start := time.Now()
	var commands, refused, applied, restores int
	for seed := first; seed < first+uint64(n); seed++ {
		cfg := machinesConfig(seed)
		cfg.Trace = *seedFlag >= 0 // a replay prints what happened
		res := runSeed(t, cfg)
		if err := res.Err(); err != nil {
			t.Fatalf("%v\nreplay: go test ./sim -run 'TestSim_StateMachines$' -seed %d -v", err, seed)
		}
		commands, refused, applied, restores = commands+res.Commands, refused+res.Refused, applied+res.Applied, restores+res.Restores
	}
	t.Logf("%d seeds in %s: %d metadata and group commands applied for their proposers, %d of them refused; %d entries applied; %d restores checked",
		n, time.Since(start).Round(time.Millisecond), commands, refused, applied, restores)
	if n > 1 && (refused == 0 || refused == commands) {
		t.Fatalf("%d of %d commands refused: the load should make some, not all, fail", refused, commands)
	}
	if n > 1 && restores == 0 {
		t.Fatalf("no restore from a snapshot was checked against another replica's state")
	}
}

// plantedMachineBug is sim_test.go's plantedBug on machinesConfig.
func plantedMachineBug(t *testing.T, name, want string, plant func(*Config), seeds int) {
	t.Helper()
	plantedBugOn(t, machinesConfig, name, want, plant, seeds)
}

func TestSim_CatchesMetadataCommandSkippedOnOneNode(t *testing.T) {
	plantedMachineBug(t, "a metadata command skipped on one node", "differs from node", func(c *Config) {
		c.SkipMetadataCommand = true
	}, 300)
}

func TestSim_CatchesOffsetCommitGoingBack(t *testing.T) {
	plantedMachineBug(t, "a lower offset commit winning", "went backwards", func(c *Config) {
		c.CommitGoesBack = true
	}, 300)
}

func TestSim_StateMachinesDeterministic(t *testing.T) {
	for _, seed := range []uint64{3, 42} {
		a, b := runSeed(t, machinesConfig(seed)), runSeed(t, machinesConfig(seed))
		if a.TraceHash != b.TraceHash || a.Commands != b.Commands || a.Applied != b.Applied {
			t.Fatalf("seed %d ran twice: trace %016x vs %016x (commands %d/%d, applied %d/%d)",
				seed, a.TraceHash, b.TraceHash, a.Commands, b.Commands, a.Applied, b.Applied)
		}
	}
}

func TestSim_CatchesOffsetsCommandSkippedOnOneNode(t *testing.T) {
	plantedMachineBug(t, "an offsets command skipped on one node", "differs from node", func(c *Config) {
		c.SkipOffsetCommand = true
	}, 300)
}

// TestStateChecker_Restore: a replica restored from a snapshot at index i
// must hold the state the others held after i.
func TestStateChecker_Restore(t *testing.T) {
	c := newChecker()
	sc := newStateChecker(c)
	for _, n := range []uint64{1, 2} {
		sc.onOpen(n, 7, "metadata", 100)
	}
	sc.onApply(1, 7, pos{5, 0}, 101)
	sc.onApply(1, 7, pos{5, 1}, 102)
	sc.onApply(1, 7, pos{6, 0}, 103) // settles node 1's state after 5: 102
	sc.onRestore(2, 7, 5, 102)
	if len(c.violations) != 0 {
		t.Fatalf("a faithful restore failed: %v", c.violations)
	}
	sc.onOpen(2, 7, "metadata", 100)
	sc.onRestore(2, 7, 5, 999)
	if got, want := len(c.violations), 1; got != want || !strings.Contains(c.violations[0], "restored from the snapshot at 5") {
		t.Fatalf("a restore to another state: violations %q, want one about the restore", c.violations)
	}
}

// TestCommandKey: the offsets checker tells resets by the JSON key that
// groups.Command.Encode writes first, without decoding every entry.
func TestCommandKey(t *testing.T) {
	for want, c := range map[string]*groups.Command{
		"commit":         {Commit: &groups.Commit{Group: "g", Generation: -1}},
		"delete_offsets": {DeleteOffsets: &groups.DeleteOffsets{Group: "g"}},
		"delete_groups":  {DeleteGroups: &groups.DeleteGroups{Groups: []string{"g"}}},
		"expire":         {Expire: &groups.Expire{NowMs: 1}},
		"new_generation": {NewGeneration: &groups.NewGeneration{Group: "g"}},
	} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got := commandKey(b); got != want {
			t.Errorf("commandKey(%s) = %q, want %q", b, got, want)
		}
	}
	if got := commandKey(nil); got != "" {
		t.Errorf("commandKey of a no-op = %q", got)
	}
}
