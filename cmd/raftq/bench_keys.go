package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// benchKeys is what --keys and --tombstone-ratio ask of the bench's
// records: keys drawn uniformly from n distinct ones, and that share of
// records sent as tombstones (a null value), so that a compacted topic
// (-c cleanup.policy=compact) has something to clean. Each producer
// draws from its own stream of --seed, so that a run is repeatable for a
// given --seed and --producers.
type benchKeys struct {
	n          int
	tombstones float64
	seed       uint64
	width      int           // digits of the largest key, to which every key is padded
	streams    atomic.Uint64 // the next producer's stream
}

// newBenchKeys checks the flags; nil without --keys.
func newBenchKeys(n int, tombstones float64, seed uint64) (*benchKeys, error) {
	switch {
	case n < 0:
		return nil, usageError{fmt.Errorf("--keys %d: want 0 (no keys) or more", n)}
	case tombstones < 0 || tombstones > 1:
		return nil, usageError{fmt.Errorf("--tombstone-ratio %g: want a share in [0, 1]", tombstones)}
	case tombstones > 0 && n == 0:
		return nil, usageError{errors.New("--tombstone-ratio needs --keys: a tombstone deletes a key")}
	case n == 0:
		return nil, nil
	}
	return &benchKeys{n: n, tombstones: tombstones, seed: seed, width: len(strconv.Itoa(n - 1))}, nil
}

// keyStream is one producer's draws; not safe for concurrent use.
type keyStream struct {
	k *benchKeys
	r *rand.Rand
}

// stream returns the next producer's stream (nil without keys).
func (k *benchKeys) stream() *keyStream {
	if k == nil {
		return nil
	}
	return &keyStream{k: k, r: rand.New(rand.NewPCG(k.seed, k.streams.Add(1)))}
}

// fill gives rec its key and, drawn at the tombstone ratio, a null
// value. Keys are decimal, zero-padded to one width ("0042" of 1000), so
// that every record has the same size.
func (s *keyStream) fill(rec *kgo.Record) {
	if s == nil {
		return
	}
	key := make([]byte, s.k.width)
	for i, v := len(key)-1, s.r.IntN(s.k.n); i >= 0; i, v = i-1, v/10 {
		key[i] = byte('0' + v%10)
	}
	rec.Key = key
	if s.k.tombstones > 0 && s.r.Float64() < s.k.tombstones {
		rec.Value = nil
	}
}
