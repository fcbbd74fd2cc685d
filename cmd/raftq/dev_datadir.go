package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// devNodeDir is the name of a dev node's data dir under --data-dir.
var devNodeDir = regexp.MustCompile(`^node([1-9][0-9]*)$`)

// checkDevNodes refuses a dev data dir that another --nodes made: its
// nodes' raft groups count voters that would never start (fewer nodes) or
// never hear of the newcomers (more), so the cluster would only time out
// after 30 s. A node dir counts once it holds node.json, which a node
// writes first; a dir without any is new.
func checkDevNodes(dir string, nodes int) error {
	if dir == "" {
		return nil // a new temp dir
	}
	ids, err := devNodeIDs(dir)
	if err != nil || len(ids) == 0 {
		return err
	}
	if len(ids) == nodes && ids[len(ids)-1] == nodes {
		return nil
	}
	made := max(len(ids), ids[len(ids)-1]) // a lost node dir still counts
	if made == nodes {
		// A node whose dir is gone would come back empty under its old
		// id, which its peers refuse.
		return fmt.Errorf("data dir %s holds %d of the %d node dirs of its dev cluster (node dirs %v): a node cannot start again without its own; give another --data-dir (or remove this one)",
			dir, len(ids), made, ids)
	}
	return fmt.Errorf("data dir %s holds a %d-node dev cluster (node dirs %v), not %d: run raftq dev --nodes %d --data-dir %s, or give another --data-dir (or remove this one) for %d nodes",
		dir, made, ids, nodes, made, dir, nodes)
}

// devNodeIDs lists the ids of the node dirs under dir that hold node.json.
func devNodeIDs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	var ids []int
	for _, e := range ents {
		m := devNodeDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "node.json")); err != nil {
			continue
		}
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}
