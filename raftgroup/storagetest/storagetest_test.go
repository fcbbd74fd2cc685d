package storagetest_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/raftgroup/storagetest"
	"github.com/raftq/raftq/sim"
)

// bugged is sim.Store with one planted bug; each breaks one promise of
// the contract.
type bugged struct {
	*sim.Store
	bug       string
	last      uint64        // last index saved in this incarnation
	snapped   bool          // a snapshot was saved in this incarnation
	held      *raftpb.Entry // "async lands late": the write held back
	heldHS    *raftpb.HardState
	heldValid bool
}

var bugs = []string{
	"new store has a term",
	"load forgets entries",
	"load forgets the hard state",
	"load drops entries after a snapshot",
	"empty save fails",
	"nil hard state resets it",
	"no overwrite of a conflicting tail",
	"unsynced saves lost at close",
	"snapshot not saved",
	"only the first snapshot saved",
	"install keeps the tail",
	"async done twice",
	"async lands after the next save",
}

func (b *bugged) Load() (raftgroup.State, error) {
	st, err := b.Store.Load()
	switch {
	case b.bug == "new store has a term" && st.IsNew():
		st.HardState = storagetest.HardState(1, 0, 0)
	case b.bug == "load forgets entries":
		st.Entries = nil
	case b.bug == "load forgets the hard state":
		st.HardState = nil
	case b.bug == "load drops entries after a snapshot" && st.Snapshot.GetMetadata().GetIndex() > 0:
		st.Entries = nil
	}
	return st, err
}

func (b *bugged) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	b.landHeld()
	switch {
	case b.bug == "empty save fails" && hs == nil && len(ents) == 0:
		return errors.New("empty save")
	case b.bug == "nil hard state resets it" && hs == nil:
		hs = &raftpb.HardState{}
	case b.bug == "no overwrite of a conflicting tail":
		for len(ents) > 0 && ents[0].GetIndex() <= b.last {
			ents = ents[1:]
		}
	case b.bug == "unsynced saves lost at close" && !sync:
		return nil
	}
	if len(ents) > 0 {
		b.last = ents[len(ents)-1].GetIndex()
	}
	return b.Store.Save(hs, ents, sync)
}

func (b *bugged) SaveAsync(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error)) {
	switch b.bug {
	case "async done twice":
		b.Store.SaveAsync(hs, ents, sync, func(err error) { done(err); done(err) })
		return
	case "async lands after the next save":
		if len(ents) > 0 {
			b.held, b.heldHS, b.heldValid = ents[0], hs, true
			b.Store.SaveAsync(nil, ents[1:], sync, done)
			return
		}
	}
	b.Store.SaveAsync(hs, ents, sync, done)
}

// landHeld writes the held-back entry, out of order, after what came
// since.
func (b *bugged) landHeld() {
	if !b.heldValid {
		return
	}
	b.heldValid = false
	_ = b.Store.Save(b.heldHS, []*raftpb.Entry{b.held}, true) // the store under it never fails
}

func (b *bugged) SaveSnapshot(snap *raftpb.Snapshot, install bool) error {
	switch {
	case b.bug == "snapshot not saved", b.bug == "only the first snapshot saved" && b.snapped:
		return nil
	case b.bug == "install keeps the tail":
		install = false
	}
	b.snapped = true
	return b.Store.SaveSnapshot(snap, install)
}

func (b *bugged) Close() error {
	b.landHeld()
	return b.Store.Close()
}

// harness opens sim.Stores, with bug planted ("" for none).
func harness(bug string) storagetest.Harness {
	var mu sync.Mutex
	disks := map[string]*sim.Store{}
	return storagetest.Harness{
		Open: func(_ testing.TB, dir string) raftgroup.Storage {
			mu.Lock()
			defer mu.Unlock()
			if disks[dir] == nil {
				disks[dir] = &sim.Store{}
			}
			return &bugged{Store: disks[dir], bug: bug}
		},
		Sync: func(s raftgroup.Storage) { s.(*bugged).Sync() },
	}
}

// recorder is a testing.TB whose failures are noted, not reported: the
// checks run on it to prove they can fail. Fatal ends the check's
// goroutine, as testing's does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msg    string
}

func (r *recorder) note(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.failed {
		r.failed, r.msg = true, msg
	}
}

func (r *recorder) Error(args ...any)                 { r.note(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.note(fmt.Sprintf(format, args...)) }
func (r *recorder) Fail()                             { r.note("Fail") }
func (r *recorder) FailNow()                          { r.note("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runCheck runs c on a recorder and returns its first failure, "" if it
// passed.
func runCheck(t *testing.T, c storagetest.Check, h storagetest.Harness) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(r, h)
	}()
	<-done
	return r.msg
}

// TestRun_CatchesPlantedBugs proves every check can fail: each catches at
// least one planted bug, and none fails on the store without one.
func TestRun_CatchesPlantedBugs(t *testing.T) {
	for _, c := range storagetest.Checks() {
		if msg := runCheck(t, c, harness("")); msg != "" {
			t.Fatalf("%s fails on sim.Store without a bug: %s", c.Name, msg)
		}
	}
	caught := map[string][]string{}
	for _, bug := range bugs {
		n := 0
		for _, c := range storagetest.Checks() {
			if msg := runCheck(t, c, harness(bug)); msg != "" {
				caught[c.Name] = append(caught[c.Name], bug)
				n++
			}
		}
		if n == 0 {
			t.Errorf("no check catches %q", bug)
		}
	}
	for _, c := range storagetest.Checks() {
		if len(caught[c.Name]) == 0 {
			t.Errorf("%s catches none of the planted bugs: it cannot fail", c.Name)
		}
		t.Logf("%s catches %q", c.Name, caught[c.Name])
	}
}
