package sim

import (
	"fmt"
	"path/filepath"
)

// corruptSome damages one file of the run's failing disk while its node
// is down, with Config.CorruptRate per tick: it flips one to three bits
// at random positions, or cuts the file at a random length, as a failing
// disk or a torn write past a sync would. The node finds it when it
// restarts. One disk fails per run (the seed's node): a cut of synced
// bytes at a log's end looks like a torn tail and is found by no check,
// so damage on every replica may lose what all of them acknowledged, as
// it would in Kafka; replication tolerates one failing disk in three.
func (s *Sim) corruptSome() {
	if s.cfg.CorruptRate == 0 || s.rng.Float64() >= s.cfg.CorruptRate {
		return
	}
	n := s.nodes[s.cfg.Seed%uint64(len(s.nodes))]
	if n.up {
		return
	}
	paths := n.disk.Paths()
	if len(paths) == 0 {
		return
	}
	path := paths[s.rng.IntN(len(paths))]
	flip := s.rng.IntN(2) == 0
	var what string
	err := n.disk.Damage(path, func(b []byte) []byte {
		if len(b) == 0 {
			what = "left empty"
			return b
		}
		if !flip {
			cut := s.rng.IntN(len(b))
			what = fmt.Sprintf("cut at byte %d of %d", cut, len(b))
			return b[:cut]
		}
		what = "bits flipped at"
		for range 1 + s.rng.IntN(3) {
			at := s.rng.IntN(len(b))
			b[at] ^= 1 << s.rng.IntN(8)
			what += fmt.Sprintf(" %d", at)
		}
		return b
	})
	if err != nil {
		s.chk.fail("corrupt node %d %s: %s", n.id, path, err)
		return
	}
	s.res.Corruptions++
	s.traceEvent("corrupt", n.id)
	s.note("node %d (down): %s %s", n.id, filepath.Base(path), what)
}
