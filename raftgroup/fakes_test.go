package raftgroup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// memNet is a FAKE network for in-process cluster tests: it carries
// envelopes between Hosts in this process through per-link queues, and
// can drop, delay and partition. Messages are marshalled and unmarshalled
// on the way, as on a wire, so no memory is shared between nodes.
type memNet struct {
	mu       sync.Mutex
	hosts    map[uint64]Receiver
	cut      map[[2]uint64]bool
	links    map[[2]uint64]chan []Envelope
	dropRate float64
	delay    time.Duration
	rng      *rand.Rand
	closed   bool
	wg       sync.WaitGroup
}

func newMemNet() *memNet {
	return &memNet{
		hosts: map[uint64]Receiver{},
		cut:   map[[2]uint64]bool{},
		links: map[[2]uint64]chan []Envelope{},
		rng:   rand.New(rand.NewPCG(1, 2)),
	}
}

func (n *memNet) transport(from uint64) *memTransport { return &memTransport{net: n, from: from} }

func (n *memNet) attach(id uint64, r Receiver) {
	n.mu.Lock()
	n.hosts[id] = r
	n.mu.Unlock()
}

func (n *memNet) detach(id uint64) {
	n.mu.Lock()
	delete(n.hosts, id)
	n.mu.Unlock()
}

// partition cuts every link between a node in side and a node outside it.
func (n *memNet) partition(side ...uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	in := map[uint64]bool{}
	for _, id := range side {
		in[id] = true
	}
	for a := uint64(1); a <= 9; a++ {
		for b := uint64(1); b <= 9; b++ {
			if in[a] != in[b] {
				n.cut[[2]uint64{a, b}] = true
			}
		}
	}
}

func (n *memNet) heal() {
	n.mu.Lock()
	n.cut = map[[2]uint64]bool{}
	n.mu.Unlock()
}

func (n *memNet) setDrop(rate float64, delay time.Duration) {
	n.mu.Lock()
	n.dropRate, n.delay = rate, delay
	n.mu.Unlock()
}

func (n *memNet) close() {
	n.mu.Lock()
	n.closed = true
	for k, c := range n.links {
		close(c)
		delete(n.links, k)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

func (n *memNet) link(from, to uint64) chan []Envelope {
	k := [2]uint64{from, to}
	c := n.links[k]
	if c == nil {
		c = make(chan []Envelope, 1024)
		n.links[k] = c
		n.wg.Add(1)
		go n.carry(from, to, c)
	}
	return c
}

func (n *memNet) carry(from, to uint64, c chan []Envelope) {
	defer n.wg.Done()
	for batch := range c {
		n.mu.Lock()
		r, delay, cut := n.hosts[to], n.delay, n.cut[[2]uint64{from, to}]
		n.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay) // simulated link latency, not a wait for a condition
		}
		if r != nil && !cut {
			r.Receive(from, batch)
		}
	}
}

type memTransport struct {
	net  *memNet
	from uint64
}

func (t *memTransport) Send(to uint64, batch []Envelope) bool {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	if n.cut[[2]uint64{t.from, to}] {
		return true // lost on the wire, as a real partition would
	}
	out := make([]Envelope, 0, len(batch))
	for _, e := range batch {
		if n.dropRate > 0 && n.rng.Float64() < n.dropRate {
			continue
		}
		out = append(out, Envelope{Group: e.Group, Msg: cloneMsg(e.Msg)})
	}
	select {
	case n.link(t.from, to) <- out:
		return true
	default:
		return false
	}
}

func (t *memTransport) SendSnapshot(to uint64, env Envelope, body io.ReadCloser, done func(error)) {
	n := t.net
	n.mu.Lock()
	r, cut := n.hosts[to], n.cut[[2]uint64{t.from, to}]
	n.mu.Unlock()
	env.Msg = cloneMsg(env.Msg)
	go func() {
		var data []byte
		var err error
		if body != nil {
			data, err = io.ReadAll(body)
			body.Close()
		}
		switch {
		case err != nil:
		case r == nil || cut:
			err = errors.New("memnet: peer unreachable")
		default:
			err = r.ReceiveSnapshot(t.from, env, bytes.NewReader(data))
		}
		done(err)
	}()
}

func cloneMsg(m *raftpb.Message) *raftpb.Message {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	var c raftpb.Message
	if err := proto.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// kvSM is a test state machine: it records every applied entry, returns
// "ok:<index>" from Apply, and snapshots to JSON. Its snapshot body is
// bulk data derived from the snapshot index, which Restore checks was
// staged by ReceiveSnapshot.
type kvSM struct {
	mu       sync.Mutex
	applied  uint64
	lastSub  int
	entries  []Entry
	staged   map[uint64][]byte
	restores int
	applyErr error
}

func newKVSM() *kvSM { return &kvSM{staged: map[uint64][]byte{}} }

type kvState struct {
	Applied uint64
	Entries []Entry
}

func (s *kvSM) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *kvSM) Apply(e Entry) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applyErr != nil {
		return nil, s.applyErr
	}
	if e.Index < s.applied || e.Index == s.applied && e.Sub <= s.lastSub {
		return nil, fmt.Errorf("kvsm: apply %d.%d after %d.%d", e.Index, e.Sub, s.applied, s.lastSub)
	}
	s.applied, s.lastSub = e.Index, e.Sub
	s.entries = append(s.entries, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
	return fmt.Sprintf("ok:%d", e.Index), nil
}

// SkipEntry makes kvSM a ConfIndexer, as partition.Replica is.
func (s *kvSM) SkipEntry(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied, s.lastSub = max(s.applied, index), 0
}

func (s *kvSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(kvState{Applied: s.applied, Entries: s.entries})
}

func snapBody(index uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("body-%d;", index)), 4096)
}

func (s *kvSM) SnapshotBody(snap *raftpb.Snapshot) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(snapBody(snap.GetMetadata().GetIndex()))), nil
}

func (s *kvSM) ReceiveSnapshot(snap *raftpb.Snapshot, body io.Reader) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.staged[snap.GetMetadata().GetIndex()] = b
	s.mu.Unlock()
	return nil
}

func (s *kvSM) Restore(snap *raftpb.Snapshot) error {
	var st kvState
	if err := json.Unmarshal(snap.GetData(), &st); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied, s.entries = st.Applied, st.Entries
	s.restores++
	return nil
}

// snapshotRestoredWithBody reports whether a received snapshot's body
// arrived intact before Restore.
func (s *kvSM) stagedBody(index uint64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staged[index]
}

func (s *kvSM) data() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.entries {
		if len(e.Data) > 0 {
			out = append(out, string(e.Data))
		}
	}
	return out
}

// memStorage is a FAKE Storage for tests that do not exercise the disk:
// it keeps everything in memory and can be told to fail.
type memStorage struct {
	mu      sync.Mutex
	state   State
	failErr error
}

func (m *memStorage) Load() (State, error) { return m.state, nil }

func (m *memStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return m.failErr
	}
	if hs != nil {
		m.state.HardState = hs
	}
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		kept := m.state.Entries
		for len(kept) > 0 && kept[len(kept)-1].GetIndex() >= first {
			kept = kept[:len(kept)-1]
		}
		m.state.Entries = append(kept, ents...)
	}
	return nil
}

func (m *memStorage) SaveSnapshot(s *raftpb.Snapshot, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return m.failErr
	}
	m.state.Snapshot = s
	return nil
}

func (m *memStorage) Release(*raftpb.Snapshot) error { return nil }
func (m *memStorage) Close() error                   { return nil }
