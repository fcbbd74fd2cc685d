package chaos

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeDataDir lays out files under dir as a node's data dir holds them.
func writeDataDir(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nodeDataDir is a small data dir of every layout a node makes; the WAL
// segment is preallocated with zeros after its records.
func nodeDataDir(t *testing.T) string {
	dir := t.TempDir()
	wal := append(bytes.Repeat([]byte{7}, 100), make([]byte, 4000)...)
	writeDataDir(t, dir, map[string][]byte{
		"node.json": []byte(`{"node":1}`),
		"raft/wal/0000000000000000-0000000000000000.wal":             wal,
		"raft/wal/0000000000000001-0000000000000010.wal.retired.tmp": wal,
		"raft/0/wal/0000000000000000-0000000000000000.wal":           bytes.Repeat([]byte{1}, 64),
		"raft/5/snap/0000000000000002-0000000000000009.snap":         []byte("snap"),
		"log/t-0/00000000000000000000.log":                           bytes.Repeat([]byte{3}, 300),
		"log/t-0/00000000000000000000.index":                         bytes.Repeat([]byte{4}, 16),
		"log/t-0/00000000000000000000.timeindex":                     bytes.Repeat([]byte{5}, 24),
		"log/t-0/00000000000000000042.log":                           nil,
		"log/t-0/partition.checkpoint":                               []byte("0 42\nabcd\n"),
		"log/t-0/replica.checkpoint":                                 []byte("{}\nabcd\n"),
		"log/t-0/raft.group":                                         []byte("5"),
		"log/t-1/isr.checkpoint.0":                                   []byte("{}\n"),
		"log/t-1/partition.checkpoint.tmp":                           []byte("x"),
		"log/t-0.snap-12/00000000000000000000.log":                   bytes.Repeat([]byte{3}, 30),
	})
	return dir
}

func TestDataFiles_ListsWhatTheNemesisMayDamage(t *testing.T) {
	got, err := DataFiles(nodeDataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []DataFile{
		{"log/t-0/00000000000000000000.index", ClassIndex, 16, 16},
		{"log/t-0/00000000000000000000.log", ClassSegment, 300, 300},
		{"log/t-0/00000000000000000000.timeindex", ClassIndex, 24, 24},
		{"log/t-0/partition.checkpoint", ClassCheckpoint, 10, 10},
		{"log/t-0/replica.checkpoint", ClassCheckpoint, 8, 8},
		{"log/t-1/isr.checkpoint.0", ClassCheckpoint, 3, 3},
		{"raft/0/wal/0000000000000000-0000000000000000.wal", ClassWAL, 64, 64},
		{"raft/wal/0000000000000000-0000000000000000.wal", ClassWAL, 4100, 100},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DataFiles =\n%+v\nwant\n%+v", got, want)
	}
}

func chooseN(t *testing.T, files []DataFile, seed uint64) Corruption {
	t.Helper()
	c, ok := ChooseCorruption(2, files, CorruptConfig{}, rand.New(rand.NewPCG(seed, 7)))
	if !ok {
		t.Fatal("no corruption chosen")
	}
	return c
}

func TestChooseCorruption_SameSeedSameChoiceAndEveryKind(t *testing.T) {
	files, err := DataFiles(nodeDataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	classes, damages, differ := map[FileClass]int{}, map[Damage]int{}, 0
	for seed := range uint64(400) {
		c := chooseN(t, files, seed)
		if again := chooseN(t, files, seed); !reflect.DeepEqual(c, again) {
			t.Fatalf("seed %d: %+v, then %+v", seed, c, again)
		}
		if other := chooseN(t, files, seed+10000); !reflect.DeepEqual(c, other) {
			differ++
		}
		classes[c.Class]++
		damages[c.Damage]++
		i := slices.IndexFunc(files, func(f DataFile) bool { return f.Path == c.File })
		if i < 0 || files[i].Class != c.Class || files[i].Size != c.Size || c.Node != 2 {
			t.Fatalf("seed %d: %+v names no listed file", seed, c)
		}
		data := files[i].Data
		switch c.Damage {
		case DamageTruncate:
			if c.Length < 0 || c.Length >= data || c.Bits != nil {
				t.Fatalf("seed %d: %+v truncates outside [0, %d)", seed, c, data)
			}
		case DamageFlip:
			if n := len(c.Bits); n < 1 || n > maxFlips || !slices.IsSorted(c.Bits) || len(slices.Compact(slices.Clone(c.Bits))) != n {
				t.Fatalf("seed %d: bits %v", seed, c.Bits)
			}
			if c.Bits[0] < 0 || c.Bits[len(c.Bits)-1] >= data*8 {
				t.Fatalf("seed %d: bits %v outside the file's %d data bytes", seed, c.Bits, data)
			}
		default:
			t.Fatalf("seed %d: damage %q", seed, c.Damage)
		}
	}
	for _, cl := range FileClasses {
		if classes[cl] < 60 {
			t.Errorf("class %s drawn %d times in 400 (classes are drawn evenly): %v", cl, classes[cl], classes)
		}
	}
	if damages[DamageFlip] < 150 || damages[DamageTruncate] < 150 {
		t.Errorf("damages %v, want both about half", damages)
	}
	if differ < 300 {
		t.Errorf("only %d of 400 choices changed with the seed", differ)
	}
	if _, ok := ChooseCorruption(1, nil, CorruptConfig{}, rand.New(rand.NewPCG(1, 1))); ok {
		t.Error("a corruption was chosen among no files")
	}
	only := CorruptConfig{Classes: []FileClass{ClassSegment}, Damages: []Damage{DamageFlip}}
	for seed := range uint64(50) {
		if c, ok := ChooseCorruption(2, files, only, rand.New(rand.NewPCG(seed, 1))); !ok || c.Class != ClassSegment || c.Damage != DamageFlip {
			t.Fatalf("seed %d: %+v with segment flips only", seed, c)
		}
	}
	if err := (CorruptConfig{Classes: []FileClass{"snap"}}).Validate(); err == nil {
		t.Error("an unknown class was accepted")
	}
}

func TestApplyCorruption_FlipsExactlyItsBitsAndTruncates(t *testing.T) {
	dir := t.TempDir()
	orig := bytes.Repeat([]byte{0xa5}, 64)
	writeDataDir(t, dir, map[string][]byte{"log/t-0/x.log": orig})
	c := Corruption{File: "log/t-0/x.log", Damage: DamageFlip, Bits: []int64{0, 9, 8*63 + 7}}
	if err := ApplyCorruption(dir, c); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "log/t-0/x.log"))
	want := slices.Clone(orig)
	want[0] ^= 1
	want[1] ^= 2
	want[63] ^= 0x80
	if !bytes.Equal(got, want) {
		t.Fatalf("after the flip: %x, want %x", got, want)
	}
	if err := ApplyCorruption(dir, c); err != nil {
		t.Fatal(err)
	}
	if got, _ = os.ReadFile(filepath.Join(dir, "log/t-0/x.log")); !bytes.Equal(got, orig) {
		t.Fatalf("a second flip did not undo the first: %x", got)
	}
	if err := ApplyCorruption(dir, Corruption{File: "log/t-0/x.log", Damage: DamageTruncate, Length: 17}); err != nil {
		t.Fatal(err)
	}
	if got, _ = os.ReadFile(filepath.Join(dir, "log/t-0/x.log")); !bytes.Equal(got, orig[:17]) {
		t.Fatalf("after the truncation: %x", got)
	}
	if s := (Corruption{Node: 2, File: "f", Class: ClassWAL, Damage: DamageFlip, Size: 9, Bits: []int64{10, 71}}).String(); s != "n2 flip f (wal, 9 B) bits 1.2 8.7" {
		t.Errorf("String = %q", s)
	}
}

// corruptEnv is a fakeEnv with a data dir per node; refuse makes the next
// starts fail, each as an exit with the given status.
type corruptEnv struct {
	fakeEnv
	dirs    map[int]string
	refuse  []string
	crashes []Exit
	dies    bool // a started node exits at once, with status 1
}

func (f *corruptEnv) DataDir(id int) (string, error) { return f.dirs[id], nil }
func (f *corruptEnv) Running(id int) bool            { return !f.dies }
func (f *corruptEnv) ForgetCrashes(id int, since time.Time) []Exit {
	gone := f.crashes
	f.crashes = nil
	return gone
}
func (f *corruptEnv) EnsureRunning(ctx context.Context, ids ...int) error {
	f.dies = false
	if err := f.fakeEnv.EnsureRunning(ctx, ids...); err != nil || len(f.refuse) == 0 {
		return err
	}
	status := f.refuse[0]
	f.refuse = f.refuse[1:]
	if status == "" { // ready, then gone
		f.dies = true
		f.crashes = append(f.crashes, Exit{Node: ids[0], Err: "exit status 1", At: time.Now()})
		return nil
	}
	f.crashes = append(f.crashes, Exit{Node: ids[0], Err: status, At: time.Now()})
	return errors.New("chaos: node 2 exited before ready; log tail:\nlevel=INFO msg=starting\nraftq server: wal x is damaged\n=== chaos: node 2 exited: " + status)
}

func TestExecutor_CorruptKillsDamagesAndRestarts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  []string
		restore bool // the damage is undone
		err     bool
		detail  string
	}{
		{name: "restarts", detail: "restart [2]"},
		{name: "refused", refuse: []string{"exit status 1"}, restore: true, detail: `refused to start (raftq server: wal x is damaged)`},
		{name: "panics", refuse: []string{"exit status 2"}, err: true, detail: "restart [2]"},
		{name: "halts after ready", refuse: []string{""}, restore: true, detail: "refused to start (chaos: node 2 exited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := nodeDataDir(t)
			before, _ := DataFiles(dir)
			env := &corruptEnv{dirs: map[int]string{2: dir}, refuse: tc.refuse}
			s := Schedule{Faults: []Fault{{ID: 0, Kind: KindCorrupt, Start: 0, Stop: time.Millisecond, Target: TargetOne, Nodes: []int{2}, Seed: 11}}}
			var ev events
			x := NewExecutor(env, s, time.Now(), ev.observer())
			x.grace = 50 * time.Millisecond
			x.Play(context.Background())
			if len(ev.ended) != 2 {
				t.Fatalf("events %+v", ev.ended)
			}
			start, stop := ev.ended[0], ev.ended[1]
			want, _ := ChooseCorruption(2, before, CorruptConfig{}, rand.New(rand.NewPCG(11, 0)))
			if start.Err != "" || start.Detail != "corrupt "+want.String() || !reflect.DeepEqual(start.Nodes, []int{2}) {
				t.Fatalf("start %+v, want the damage %s", start, want)
			}
			after, _ := DataFiles(dir)
			if changed := !reflect.DeepEqual(before, after) || fileChanged(t, dir, want); changed == tc.restore {
				t.Errorf("files changed %v after the stop, want %v", changed, !tc.restore)
			}
			if (stop.Err != "") != tc.err || !strings.Contains(stop.Detail, tc.detail) {
				t.Errorf("stop %+v, want detail %q and an error %v", stop, tc.detail, tc.err)
			}
			calls := []string{"kill [2]", "start [2]"}
			if tc.restore {
				calls = append(calls, "start [2]")
			}
			if !reflect.DeepEqual(env.calls, calls) {
				t.Errorf("calls %q, want %q", env.calls, calls)
			}
		})
	}
}

// fileChanged reports whether c's file differs from what nodeDataDir
// wrote.
func fileChanged(t *testing.T, dir string, c Corruption) bool {
	t.Helper()
	fresh := nodeDataDir(t)
	a, _ := os.ReadFile(filepath.Join(fresh, c.File))
	b, _ := os.ReadFile(filepath.Join(dir, c.File))
	return !bytes.Equal(a, b)
}

func TestPlan_CorruptHitsOneNodeWithASeed(t *testing.T) {
	s := mustPlan(t, planCfg(3, KindCorrupt))
	if len(s.Faults) == 0 {
		t.Fatal("no corrupt fault planned")
	}
	seeds := map[uint64]bool{}
	for _, f := range s.Faults {
		if f.Target != TargetOne || len(f.Nodes) != 1 || f.Nodes[0] < 1 || f.Nodes[0] > 5 {
			t.Fatalf("fault %s on %v", f, f.Nodes)
		}
		seeds[f.Seed] = true
	}
	if len(seeds) != len(s.Faults) {
		t.Errorf("%d seeds for %d faults", len(seeds), len(s.Faults))
	}
}

// TestExecutor_KillStopLeavesACorruptedNodeToItsFault: a kill of every
// node that overlaps a corrupt fault does not restart the damaged node
// at its stop (a refusal there would be a crash); the corrupt stop does.
func TestExecutor_KillStopLeavesACorruptedNodeToItsFault(t *testing.T) {
	env := &corruptEnv{dirs: map[int]string{2: nodeDataDir(t)}}
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindCorrupt, Start: 0, Stop: 3 * time.Millisecond, Target: TargetOne, Nodes: []int{2}, Seed: 5},
		{ID: 1, Kind: KindKill, Start: time.Millisecond, Stop: 2 * time.Millisecond, Target: TargetAll, Nodes: []int{1, 2, 3}},
	}}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.grace = 0
	x.Play(context.Background())
	want := []string{"kill [2]", "kill [1 2 3]", "start [1 3]", "start [2]"}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want %q", env.calls, want)
	}
	if d := ev.ended[2].Detail; d != "restart [1 3] ([2] left to its corrupt fault)" {
		t.Errorf("kill stop detail %q", d)
	}
}
