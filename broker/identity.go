package broker

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

// identity is node.json: which cluster and node a data dir belongs to,
// and the incarnation, a random id the dir gets when it is created. A node
// whose data was wiped comes back with the same node id but a new
// incarnation, which its peers refuse (see checkIncarnation).
type identity struct {
	ClusterID   string `json:"cluster_id"`
	NodeID      uint64 `json:"node_id"`
	Incarnation string `json:"incarnation,omitempty"`
	// Joining: the node has learnt the cluster id from a seed but is not
	// yet admitted (join.go); a start with seeds asks again.
	Joining bool `json:"joining,omitempty"`
}

// claimDataDir creates dir's node.json, or checks that an existing one
// names this cluster and node, so that a data dir is never used by another.
// It returns the dir's incarnation, adding one to a node.json written
// before incarnations existed.
func claimDataDir(dir, clusterID string, nodeID uint64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	name := filepath.Join(dir, "node.json")
	got, ok, err := readIdentity(dir)
	if err != nil {
		return "", err
	}
	if !ok {
		id := identity{ClusterID: clusterID, NodeID: nodeID, Incarnation: newIncarnation()}
		return id.Incarnation, writeIdentity(name, id)
	}
	if got.ClusterID != clusterID || got.NodeID != nodeID {
		return "", fmt.Errorf("data dir %s belongs to cluster %q node %d, not cluster %q node %d",
			dir, got.ClusterID, got.NodeID, clusterID, nodeID)
	}
	if got.Incarnation == "" {
		got.Incarnation = newIncarnation()
		if err := writeIdentity(name, got); err != nil {
			return "", err
		}
	}
	return got.Incarnation, nil
}

// readIdentity reads dir's node.json; ok is false when there is none.
func readIdentity(dir string) (id identity, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, false, fmt.Errorf("data dir %s: node.json: %w", dir, err)
	}
	return id, true, nil
}

func newIncarnation() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}

func writeIdentity(name string, id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return writeIdentityFile(name, append(b, '\n'))
}

// writeIdentityFile writes a small file durably (internal/durable). The
// rename must last too: a node.json lost in a power cut would give the
// node a new incarnation, which its peers refuse.
func writeIdentityFile(name string, b []byte) error {
	return durable.WriteFile(name, b, 0o644)
}

// checkIncarnation is the peer transport's judge of a connecting node: a
// node id the metadata registered from another data directory is refused.
// That node lost the raft logs and votes it gave; rejoining under the old
// id would let it elect a leader without committed entries. Ids not yet
// registered, or registered before incarnations existed, are let in.
func (n *Node) checkIncarnation(node uint64, incarnation string) error {
	st := n.meta.View()
	if a, ok := st.Admitted[node]; ok && a.Incarnation != incarnation {
		return fmt.Errorf("node %d was admitted from data directory incarnation %s, but presents %q: "+
			"a node whose data was lost must not rejoin under its old id", node, a.Incarnation, incarnation)
	}
	b, ok := st.Brokers[node]
	if !ok || b.Incarnation == "" || b.Incarnation == incarnation {
		return nil
	}
	return fmt.Errorf("node %d is registered from data directory incarnation %s, but presents %q: "+
		"a node whose data was lost must not rejoin under its old id", node, b.Incarnation, incarnation)
}
