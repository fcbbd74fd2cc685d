package coordinator

import (
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AdmitNode admits a node that joins a running cluster (raftq server
// --seeds): every node's transport learns its peer address from the
// state (State.Admitted), and the metadata leader adds it to group 0 as
// a learner once its own transport has the address. Admitting again with
// the same incarnation only updates the address, so a retried join is
// harmless; another incarnation of an id already admitted or registered
// is refused, as RegisterBroker refuses it.
type AdmitNode struct {
	ID          uint64 `json:"id"`
	PeerAddr    string `json:"peer_addr"`
	Incarnation string `json:"incarnation"`
}

// Admission is a node admitted by AdmitNode. It stays after the node
// registers: it is the record of the incarnation that joined.
type Admission struct {
	PeerAddr    string `json:"peer_addr"`
	Incarnation string `json:"incarnation"`
	// Index is the raft index of the first admission, for operators.
	Index uint64 `json:"index"`
}

func (s *State) admitNode(a *AdmitNode, index uint64) Result {
	if err := CheckAdmission(s, a.ID, a.Incarnation); err != nil {
		return Result{Err: err}
	}
	if !Dialable(a.PeerAddr) {
		return Result{Err: cmdErr(kerr.InvalidRequest, "node %d: peer address %q is not a host:port other nodes can dial", a.ID, a.PeerAddr)}
	}
	adm := Admission{PeerAddr: a.PeerAddr, Incarnation: a.Incarnation, Index: index}
	if old, ok := s.Admitted[a.ID]; ok {
		adm.Index = old.Index
	}
	m := maps.Clone(s.Admitted) // copy on write: published states share the map
	if m == nil {
		m = map[uint64]*Admission{}
	}
	m[a.ID] = &adm
	s.Admitted = m
	if slices.Contains(s.Removed, a.ID) { // the id comes back, on an empty disk
		s.Removed = slices.DeleteFunc(slices.Clone(s.Removed), func(id uint64) bool { return id == a.ID })
	}
	return Result{}
}

// CheckAdmission reports why s refuses to admit node id from the data
// directory incarnation, for apply and for a seed's early answer to a
// joining node: node id 0, no incarnation, or an id that another
// incarnation was admitted or registered under (a node that lost its
// data must not come back under its old id: it lost the votes and
// entries it acknowledged).
func CheckAdmission(s *State, id uint64, incarnation string) error {
	if id == 0 {
		return cmdErr(kerr.InvalidRequest, "node id 0 is reserved")
	}
	if incarnation == "" {
		return cmdErr(kerr.InvalidRequest, "node %d: no data directory incarnation", id)
	}
	if b, ok := s.Brokers[id]; ok && b.Incarnation != "" && b.Incarnation != incarnation {
		return cmdErr(kerr.InconsistentClusterID,
			"node id %d is registered from another data directory (incarnation %s, not %s): start the new node with an unused --node-id", id, b.Incarnation, incarnation)
	}
	if slices.Contains(s.RemovedIncarnations, incarnation) {
		return cmdErr(kerr.InconsistentClusterID,
			"node %d: data directory incarnation %s belongs to a removed broker; start it on an empty data directory", id, incarnation)
	}
	if old, ok := s.Admitted[id]; ok && old.Incarnation != incarnation {
		return cmdErr(kerr.InconsistentClusterID,
			"node id %d was admitted from another data directory (incarnation %s, not %s): start the new node with an unused --node-id", id, old.Incarnation, incarnation)
	}
	return nil
}

// checkAdmitted refuses a registration from another incarnation than the
// one admitted under the id (RegisterBroker).
func (s *State) checkAdmitted(b *Broker) error {
	if a, ok := s.Admitted[b.ID]; ok && b.Incarnation != "" && a.Incarnation != b.Incarnation {
		return cmdErr(kerr.InconsistentClusterID,
			"broker %d was admitted from data directory incarnation %s, not %q: a node that lost its data must not rejoin under its old id",
			b.ID, a.Incarnation, b.Incarnation)
	}
	return nil
}

// checkAdmissions is State.check's part for admissions: each has an id,
// an address and an incarnation, the same as its broker's once it
// registered.
func (s *State) checkAdmissions() error {
	for id, a := range s.Admitted {
		if id == 0 || a == nil || a.PeerAddr == "" || a.Incarnation == "" {
			return fmt.Errorf("admission of node %d: %+v", id, a)
		}
		if b, ok := s.Brokers[id]; ok && b.Incarnation != "" && b.Incarnation != a.Incarnation {
			return fmt.Errorf("node %d admitted from incarnation %s, registered from %s", id, a.Incarnation, b.Incarnation)
		}
	}
	return nil
}

// AdmittedIDs returns the ids of every admitted node, sorted.
func (s *State) AdmittedIDs() []uint64 {
	return slices.Sorted(maps.Keys(s.Admitted))
}

// PeerAddrs returns every node's peer address that the state knows: an
// admitted node's, replaced by its registration's once it registered
// (a node registers the address it advertises now). Addresses with a
// wildcard host (a node that listens on every interface and advertises
// none) are left out: nobody can dial them.
func (s *State) PeerAddrs() map[uint64]string {
	out := map[uint64]string{}
	for id, a := range s.Admitted {
		if Dialable(a.PeerAddr) {
			out[id] = a.PeerAddr
		}
	}
	for id, b := range s.Brokers {
		if Dialable(b.PeerAddr) {
			out[id] = b.PeerAddr
		}
	}
	return out
}

// Dialable reports whether addr is a host:port another node can dial:
// not empty, not a wildcard address.
func Dialable(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsUnspecified()
}
