package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// FileClass is the kind of a node file the corrupt nemesis may damage.
type FileClass string

// The file classes, in the order the nemesis draws from.
const (
	ClassSegment    FileClass = "segment"    // log/<topic>-<p>/<base>.log
	ClassIndex      FileClass = "index"      // .index and .timeindex
	ClassCheckpoint FileClass = "checkpoint" // partition.checkpoint, replica.checkpoint, isr.checkpoint.{0,1}
	ClassWAL        FileClass = "wal"        // raft/wal/*.wal, raft/<group>/wal/*.wal
)

// FileClasses lists every class.
var FileClasses = []FileClass{ClassSegment, ClassIndex, ClassCheckpoint, ClassWAL}

// Damage is what the corrupt nemesis does to a file.
type Damage string

// The damages.
const (
	DamageFlip     Damage = "flip"     // flip a few bits at random positions
	DamageTruncate Damage = "truncate" // cut the file at a random length
)

// maxFlips bounds the bits one flip damage turns over.
const maxFlips = 4

// Damages lists every damage.
var Damages = []Damage{DamageFlip, DamageTruncate}

// CorruptConfig narrows what the corrupt nemesis damages; empty lists
// mean every class and every damage.
type CorruptConfig struct {
	Classes []FileClass
	Damages []Damage
}

// Validate refuses unknown classes and damages.
func (c CorruptConfig) Validate() error {
	for _, cl := range c.Classes {
		if !slices.Contains(FileClasses, cl) {
			return fmt.Errorf("chaos: unknown corrupt file class %q (want one of %v)", cl, FileClasses)
		}
	}
	for _, d := range c.Damages {
		if !slices.Contains(Damages, d) {
			return fmt.Errorf("chaos: unknown corrupt damage %q (want one of %v)", d, Damages)
		}
	}
	return nil
}

func (c CorruptConfig) classes() []FileClass {
	if len(c.Classes) == 0 {
		return FileClasses
	}
	return c.Classes
}

func (c CorruptConfig) damages() []Damage {
	if len(c.Damages) == 0 {
		return Damages
	}
	return c.Damages
}

// DataFile is a file the corrupt nemesis may damage, relative to a
// node's data directory.
type DataFile struct {
	Path  string // slash-separated, relative to the data dir
	Class FileClass
	Size  int64
	// Data is the offset after the last non-zero byte: etcd preallocates
	// WAL segments with zeros, and damage drawn there would mostly hit
	// bytes nobody reads.
	Data int64
}

// Corruption is one damage done to one file: enough to redo it, and to
// say exactly what was done.
type Corruption struct {
	Node   int       `json:"node"`
	File   string    `json:"file"` // relative to the node's data dir
	Class  FileClass `json:"class"`
	Damage Damage    `json:"damage"`
	Size   int64     `json:"size"` // the file's size before
	// Bits are the flipped bits, as byte offset*8 + bit (0 the lowest).
	Bits []int64 `json:"bits,omitempty"`
	// Length is a truncation's new size.
	Length int64 `json:"length,omitempty"`
}

// String reads "n2 flip log/t-0/00000000000000000000.log (segment,
// 81234 B) bits 1023.4 5512.0", or "... truncate ... to 4711 B".
func (c Corruption) String() string {
	head := fmt.Sprintf("n%d %s %s (%s, %d B)", c.Node, c.Damage, c.File, c.Class, c.Size)
	if c.Damage == DamageTruncate {
		return fmt.Sprintf("%s to %d B", head, c.Length)
	}
	parts := make([]string, len(c.Bits))
	for i, b := range c.Bits {
		parts[i] = fmt.Sprintf("%d.%d", b/8, b%8)
	}
	return head + " bits " + strings.Join(parts, " ")
}

// classify names the class of a data-dir file, or "" for one the
// nemesis leaves alone (node.json, raft snapshots, staged snapshot
// logs, temporary and retired files, raft.group).
func classify(rel string) FileClass {
	parts := strings.Split(rel, "/")
	name := parts[len(parts)-1]
	switch {
	case strings.HasSuffix(name, ".tmp"):
		return ""
	case len(parts) == 3 && parts[0] == "log" && !strings.Contains(parts[1], ".snap-"):
		switch {
		case strings.HasSuffix(name, ".log"):
			return ClassSegment
		case strings.HasSuffix(name, ".index"), strings.HasSuffix(name, ".timeindex"):
			return ClassIndex
		case name == "partition.checkpoint", name == "replica.checkpoint", strings.HasPrefix(name, "isr.checkpoint."):
			return ClassCheckpoint
		}
	case parts[0] == "raft" && len(parts) >= 3 && parts[len(parts)-2] == "wal" && strings.HasSuffix(name, ".wal"):
		return ClassWAL
	}
	return ""
}

// DataFiles lists the files of dataDir the corrupt nemesis may damage,
// sorted by path; files without a non-zero byte are left out.
func DataFiles(dataDir string) ([]DataFile, error) {
	var out []DataFile
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		class := classify(rel)
		if class == "" {
			return nil
		}
		size, data, err := dataEnd(path)
		if err != nil {
			return err
		}
		if data > 0 {
			out = append(out, DataFile{Path: rel, Class: class, Size: size, Data: data})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: list data files of %s: %w", dataDir, err)
	}
	slices.SortFunc(out, func(a, b DataFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// dataEnd returns a file's size and the offset after its last non-zero
// byte.
func dataEnd(path string) (size, data int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				data = off + int64(i) + 1
				break
			}
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return off, data, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
}

// ChooseCorruption draws the damage of node's files: a class among
// those present (of cfg's), uniformly (so that a node's hundreds of
// segments do not crowd out its one WAL), a file of it, then a flip of 1
// to 4 bits at positions below the file's last non-zero byte, or a
// truncation to a length below it, one or the other (of cfg's) with even
// odds. The same files, cfg and rng state give the same corruption. It
// returns false when no file is of cfg's classes.
func ChooseCorruption(node int, files []DataFile, cfg CorruptConfig, rng *rand.Rand) (Corruption, bool) {
	var classes []FileClass
	for _, c := range cfg.classes() {
		if slices.ContainsFunc(files, func(f DataFile) bool { return f.Class == c }) {
			classes = append(classes, c)
		}
	}
	if len(classes) == 0 {
		return Corruption{}, false
	}
	class := classes[rng.IntN(len(classes))]
	of := slices.DeleteFunc(slices.Clone(files), func(f DataFile) bool { return f.Class != class })
	f := of[rng.IntN(len(of))]
	c := Corruption{Node: node, File: f.Path, Class: f.Class, Size: f.Size}
	if ds := cfg.damages(); len(ds) == 1 && ds[0] == DamageFlip || len(ds) > 1 && rng.IntN(2) == 1 {
		c.Damage = DamageFlip
	} else {
		c.Damage = DamageTruncate
	}
	if c.Damage == DamageTruncate {
		c.Length = rng.Int64N(f.Data)
		return c, true
	}
	for n := 1 + rng.IntN(maxFlips); len(c.Bits) < n; {
		b := rng.Int64N(f.Data * 8)
		if !slices.Contains(c.Bits, b) {
			c.Bits = append(c.Bits, b)
		}
	}
	slices.Sort(c.Bits)
	return c, true
}

// ApplyCorruption does c to its file under dataDir and fsyncs it.
func ApplyCorruption(dataDir string, c Corruption) error {
	path := filepath.Join(dataDir, filepath.FromSlash(c.File))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("chaos: corrupt %s: %w", c.File, err)
	}
	err = damage(f, c)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chaos: corrupt %s: %w", c.File, err)
	}
	return nil
}

func damage(f *os.File, c Corruption) error {
	switch c.Damage {
	case DamageTruncate:
		return f.Truncate(c.Length)
	case DamageFlip:
		var b [1]byte
		for _, bit := range c.Bits {
			if _, err := f.ReadAt(b[:], bit/8); err != nil {
				return err
			}
			b[0] ^= 1 << (bit % 8)
			if _, err := f.WriteAt(b[:], bit/8); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown damage %q", c.Damage)
}

// CorruptEnv is an Env whose nodes' files the corrupt nemesis can reach
// (*Cluster).
type CorruptEnv interface {
	Env
	// DataDir is node id's data directory.
	DataDir(id int) (string, error)
	// ForgetCrashes removes node id's exits since t from the crashes
	// the env reports and returns them: a start the nemesis saw refused.
	ForgetCrashes(id int, since time.Time) []Exit
	// Running reports whether node id's process is alive.
	Running(id int) bool
}

// refusalGrace is how long a corrupt stop watches a node it restarted
// (Executor.grace):
// damage the node's open let through (a flipped WAL record that etcd
// takes for a torn write and repairs) can still stop it at once, when
// raft finds entries missing that its leader knows it acknowledged.
const refusalGrace = 3 * time.Second

var _ CorruptEnv = (*Cluster)(nil)

// DataDir is node id's data directory.
func (c *Cluster) DataDir(id int) (string, error) {
	n, err := c.Node(id)
	if err != nil {
		return "", err
	}
	return n.DataDir, nil
}

// ForgetCrashes removes node id's exits since t from Crashes and returns
// them.
func (c *Cluster) ForgetCrashes(id int, since time.Time) []Exit {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []Exit
	c.crashes = slices.DeleteFunc(c.crashes, func(e Exit) bool {
		if e.Node == id && !e.At.Before(since) {
			gone = append(gone, e)
			return true
		}
		return false
	})
	return gone
}

// corruptRun is a corrupt fault under way: what it did, and what undoes
// it.
type corruptRun struct {
	dir  string
	c    Corruption
	orig []byte // the file before the damage
}

// undo puts the file back as it was before the damage, whole (a node
// that started on it may have changed it since: etcd's repair of what
// it took for a torn write cuts the WAL and keeps the old one as
// <name>.broken, which goes too).
func (r *corruptRun) undo() error {
	path := filepath.Join(r.dir, filepath.FromSlash(r.c.File))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(r.orig)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if rerr := os.Remove(path + ".broken"); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

func (x *Executor) corruptEnv() (CorruptEnv, error) {
	env, ok := x.env.(CorruptEnv)
	if !ok {
		return nil, fmt.Errorf("%w: corrupt on an env without data directories (%T)", ErrUnsupported, x.env)
	}
	return env, nil
}

// startCorrupt kills the fault's node, then chooses and does the damage
// from the files it finds and the fault's seed.
func (x *Executor) startCorrupt(ctx context.Context, f Fault) ([]int, string, error) {
	env, err := x.corruptEnv()
	if err != nil {
		return nil, "corrupt", err
	}
	node := f.Nodes[0]
	if err := env.Kill(ctx, node); err != nil {
		return []int{node}, fmt.Sprintf("corrupt n%d: kill", node), err
	}
	dir, err := env.DataDir(node)
	if err != nil {
		return []int{node}, fmt.Sprintf("corrupt n%d: killed", node), err
	}
	files, err := DataFiles(dir)
	if err != nil {
		return []int{node}, fmt.Sprintf("corrupt n%d: killed", node), err
	}
	c, ok := ChooseCorruption(node, files, x.s.Config.Corrupt, rand.New(rand.NewPCG(f.Seed, uint64(f.ID))))
	if !ok {
		return []int{node}, fmt.Sprintf("corrupt n%d: killed; no file to damage", node), nil
	}
	orig, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.File)))
	if err != nil {
		return []int{node}, fmt.Sprintf("corrupt n%d: killed", node), err
	}
	run := &corruptRun{dir: dir, c: c, orig: orig}
	if err := ApplyCorruption(dir, c); err != nil {
		return []int{node}, "corrupt " + c.String() + ": failed", err
	}
	x.corrupts[f.ID] = run
	return []int{node}, "corrupt " + c.String(), nil
}

// stopCorrupt restarts the node. A node that refuses to start (an exit
// with status 1 before it is ready: raftq refuses a data dir whose raft
// state was lost), or that exits so within Executor.grace of being
// ready, is not left down: the nemesis puts the file back as it was
// before the damage, as restoring it from a backup would, and starts
// the node again, so that the run goes on; the detail says so. A start
// that ends any other way (a panic exits 2) stays a crash.
func (x *Executor) stopCorrupt(ctx context.Context, f Fault, nodes []int) (string, error) {
	env, err := x.corruptEnv()
	if err != nil {
		return "restart", err
	}
	began := time.Now()
	err = env.EnsureRunning(ctx, nodes...)
	run := x.corrupts[f.ID]
	if err == nil && run != nil {
		err = watchStart(ctx, env, run.c.Node, x.grace)
	}
	if err == nil {
		delete(x.corrupts, f.ID)
	}
	if err == nil || run == nil {
		return fmt.Sprintf("restart %v", nodes), err
	}
	gone := env.ForgetCrashes(run.c.Node, began)
	refused := len(gone) > 0 && !slices.ContainsFunc(gone, func(e Exit) bool { return e.Err != "exit status 1" })
	if !refused {
		return fmt.Sprintf("restart %v", nodes), err
	}
	why := refusal(err)
	if uerr := run.undo(); uerr != nil {
		return fmt.Sprintf("restart %v: refused (%s); undoing the damage failed", nodes, why), uerr
	}
	delete(x.corrupts, f.ID)
	return fmt.Sprintf("restart %v: refused to start (%s); the nemesis undid the damage and restarted it", nodes, why),
		env.EnsureRunning(ctx, nodes...)
}

// watchStart waits grace for node to exit after a start that
// succeeded; an exit is an error.
func watchStart(ctx context.Context, env CorruptEnv, node int, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		if !env.Running(node) {
			return fmt.Errorf("chaos: node %d exited within %s of being ready", node, grace)
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// heldByCorrupt leaves out of nodes those whose files a corrupt fault
// damaged and has not yet restarted: that fault's stop restarts them,
// and a refusal is its to handle. The note says who was left.
func (x *Executor) heldByCorrupt(nodes []int) ([]int, string) {
	var held []int
	for _, r := range x.corrupts {
		if slices.Contains(nodes, r.c.Node) {
			held = append(held, r.c.Node)
		}
	}
	if len(held) == 0 {
		return nodes, ""
	}
	slices.Sort(held)
	rest := slices.DeleteFunc(slices.Clone(nodes), func(n int) bool { return slices.Contains(held, n) })
	return rest, fmt.Sprintf(" (%v left to its corrupt fault)", held)
}

// refusal picks the node's own error out of a start error's log tail:
// the last line before the harness's exit line, which is what a process
// that exits 1 printed last.
func refusal(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for _, l := range slices.Backward(lines) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== chaos") {
			return l
		}
	}
	return lines[0]
}
