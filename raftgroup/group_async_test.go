package raftgroup

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// gatedStorage is a WAL per group whose SaveAsync calls wait, while the
// gate is shut, until it opens: a disk that stalls this node's fsyncs.
type gatedStorage struct {
	*DiskStorage
	gate *storageGate
}

type storageGate struct {
	mu     sync.Mutex
	shut   bool
	queued []func()
}

func (s *gatedStorage) SaveAsync(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error)) {
	save := func() { done(s.Save(hs, ents, sync)) }
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if s.gate.shut {
		s.gate.queued = append(s.gate.queued, save)
		return
	}
	save()
}

func (g *storageGate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}

// open runs the queued saves in order, on this goroutine as a flusher
// would, and lets later ones through.
func (g *storageGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, save := range g.queued {
		save()
	}
	g.queued, g.shut = nil, false
}

// With AsyncStorageWrites a leader whose own fsync stalls still commits
// once its followers have the entry durable (raft counts a quorum of
// durable logs, and the leader's is not needed for one), but neither
// applies the entry nor reports it appended until its own log has it:
// raft hands over only entries durable here.
func TestAsyncStorageWrites_LeaderCommitsDuringItsOwnFsync(t *testing.T) {
	gates := map[uint64]*storageGate{}
	c := newCluster(t, 3, []uint64{1}, func(cfg *Config) {
		cfg.AsyncStorageWrites = true
		gate := &storageGate{}
		gates[cfg.NodeID] = gate
		node, logger := cfg.NodeID, testLogger(t)
		cfg.NewStorage = func(group uint64, dir string) (Storage, error) {
			ds, err := OpenDiskStorage(dir, node, group, FsyncAlways, logger)
			if err != nil {
				return nil, err
			}
			return &gatedStorage{DiskStorage: ds, gate: gate}, nil
		}
	})
	l := c.leader(1)
	c.propose(l, "before")
	gate := gates[l.node]
	gate.close()
	defer gate.open()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := l.Propose(ctx, []byte("during"))
	if err != nil {
		t.Fatal(err)
	}
	var index uint64
	eventually(t, "the leader to index the proposal", func() bool {
		read := make(chan struct{})
		if l.submit(func() { index = p.index; close(read) }) != nil {
			return false
		}
		<-read
		return index != 0
	})
	eventually(t, "a commit while the leader's fsync is stalled", func() bool {
		return l.Status().Commit >= index
	})
	if st := l.Status(); st.Applied >= index {
		t.Fatalf("applied %d with entry %d not yet durable on the leader", st.Applied, index)
	}
	select {
	case <-p.Appended():
		t.Fatal("reported appended before the leader's own save completed")
	case <-p.Done():
		t.Fatalf("finished before the leader's own save completed: %v", p.err)
	default:
	}

	gate.open()
	res, err := p.Wait(ctx)
	if err != nil || res.Index != index {
		t.Fatalf("after the save: %+v, %v; want applied at %d", res, err, index)
	}
	if _, _, err := p.WaitAppended(ctx); err != nil {
		t.Fatal(err)
	}
	c.converged(1, []string{"before", "during"}, 1, 2, 3)
}

// A proposal taken in the same turn as an operation that halts the group
// fails with ErrStopped instead of waiting for ever.
func TestGroup_ProposalTakenWithAHaltFails(t *testing.T) {
	c := newCluster(t, 1, []uint64{1}, nil)
	l := c.leader(1)
	started, release := make(chan struct{}), make(chan struct{})
	if err := l.submit(func() { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started // the group is busy: what follows lands in one inbox
	if err := l.submit(func() { l.fatal("test", errors.New("halt")) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := l.Propose(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := p.Wait(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("proposal taken with the halt: %v, want ErrStopped", err)
	}
}
