package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// gatedSM persists its snapshots only when the gate opens, like a
// partition whose snapshot fsync is slow.
type gatedSM struct {
	*kvSM
	gate      chan struct{}
	persisted atomic.Int32
}

func (s *gatedSM) PrepareSnapshot() ([]byte, func() error, error) {
	data, err := s.Snapshot()
	return data, func() error {
		<-s.gate
		s.persisted.Add(1)
		return nil
	}, err
}

// TestCluster_SnapshotPersistsInBackground: while a state machine's
// snapshot is being made durable, the group keeps committing and applying,
// and records the snapshot (compacting its log) only once persist is done.
func TestCluster_SnapshotPersistsInBackground(t *testing.T) {
	testSnapshotPersistsInBackground(t, storageMode{})
}

func testSnapshotPersistsInBackground(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, nil, func(cfg *Config) {
		cfg.SnapshotEntries = 5
		cfg.SnapshotCatchUpEntries = 2
	})
	gate := make(chan struct{})
	sms := map[uint64]*gatedSM{}
	for id := uint64(1); id <= 3; id++ {
		sm := &gatedSM{kvSM: newKVSM(), gate: gate}
		sms[id] = sm
		if _, err := c.host(id).CreateGroup(GroupConfig{ID: 1, Peers: []uint64{1, 2, 3}, StateMachine: sm}); err != nil {
			t.Fatal(err)
		}
	}
	l := c.leader(1)
	for i := range 30 {
		c.propose(l, string(rune('a'+i%26)))
	}
	if snap, _ := l.mem.Snapshot(); snap.GetMetadata().GetIndex() != 0 {
		t.Fatalf("snapshot at %d recorded before its state was persisted", snap.GetMetadata().GetIndex())
	}
	if n := sms[l.node].persisted.Load(); n != 0 {
		t.Fatalf("%d snapshots persisted through a closed gate", n)
	}
	close(gate)
	eventually(t, "the snapshot recorded and the log compacted", func() bool {
		snap, _ := l.mem.Snapshot()
		first, _ := l.mem.FirstIndex()
		return snap.GetMetadata().GetIndex() >= 5 && first > 2
	})
	c.propose(l, "after") // and it still takes snapshots after the first
	eventually(t, "a second snapshot", func() bool { return sms[l.node].persisted.Load() >= 2 })
}

// failingPersistSM cannot make its snapshots durable.
type failingPersistSM struct{ *kvSM }

func (s failingPersistSM) PrepareSnapshot() ([]byte, func() error, error) {
	data, err := s.Snapshot()
	return data, func() error { return errors.New("disk on fire") }, err
}

// TestCluster_FailedBackgroundSnapshotHalts: a persist error is as fatal as
// any other storage error, though it happens off the group's goroutine.
func TestCluster_FailedBackgroundSnapshotHalts(t *testing.T) {
	c := newCluster(t, 1, nil, func(cfg *Config) { cfg.SnapshotEntries = 3 })
	g, err := c.host(1).CreateGroup(GroupConfig{ID: 1, Peers: []uint64{1}, StateMachine: failingPersistSM{newKVSM()}})
	if err != nil {
		t.Fatal(err)
	}
	l := c.leader(1)
	for i := range 5 { // the halt may come before all of them commit
		if p, err := l.Propose(context.Background(), []byte(fmt.Sprint("x", i))); err == nil {
			_, _ = p.Wait(context.Background())
		}
	}
	eventually(t, "the node's fatal handler called", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.fatals {
			var fe *FatalError
			if errors.As(err, &fe) && fe.Op == "snapshot" && strings.Contains(err.Error(), "disk on fire") {
				return true
			}
		}
		return false
	})
	if _, err := g.Propose(context.Background(), []byte("after")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after the failed snapshot: %v, want ErrStopped", err)
	}
	if snap, _ := g.mem.Snapshot(); snap.GetMetadata().GetIndex() != 0 {
		t.Errorf("a snapshot at %d was recorded though its state was not persisted", snap.GetMetadata().GetIndex())
	}
}
