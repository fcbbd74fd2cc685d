package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// identity is node.json: which cluster and node a data dir belongs to.
type identity struct {
	ClusterID string `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"`
}

// claimDataDir creates dir's node.json, or checks that an existing one
// names this cluster and node, so that a data dir is never used by another.
func claimDataDir(dir, clusterID string, nodeID uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	name := filepath.Join(dir, "node.json")
	want := identity{ClusterID: clusterID, NodeID: nodeID}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return writeIdentity(name, want)
	}
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	var got identity
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("data dir %s: node.json: %w", dir, err)
	}
	if got != want {
		return fmt.Errorf("data dir %s belongs to cluster %q node %d, not cluster %q node %d",
			dir, got.ClusterID, got.NodeID, clusterID, nodeID)
	}
	return nil
}

func writeIdentity(name string, id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return writeIdentityFile(name, append(b, '\n'))
}

// writeIdentityFile writes a small file durably: temp file, fsync, rename.
func writeIdentityFile(name string, b []byte) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return os.Rename(tmp, name)
}
