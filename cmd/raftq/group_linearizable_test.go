package main

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// grpHistory records OffsetCommit (writes) and OffsetFetch (reads) of
// committed offsets per partition of one group, for a linearizability
// check of each partition's committed offset as a register.
type grpHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   map[int32][]porcupine.Operation
}

// grpRegOp is a register operation: a commit writes Value, a fetch reads.
type grpRegOp struct {
	Write bool
	Value int64
}

// grpUnknown is the return time of an operation whose outcome is unknown
// (it may take effect at any time after its call).
const grpUnknown = math.MaxInt64 / 2

func newGrpHistory() *grpHistory {
	return &grpHistory{start: time.Now(), ops: map[int32][]porcupine.Operation{}}
}

func (h *grpHistory) since(t time.Time) int64 { return int64(t.Sub(h.start)) }

// commit records a commit of value to partition p; ret < 0 means the
// outcome is unknown.
func (h *grpHistory) commit(client int, p int32, value int64, call, ret time.Time, known bool) {
	r := int64(grpUnknown)
	if known {
		r = h.since(ret)
	}
	h.add(p, porcupine.Operation{ClientId: client, Input: grpRegOp{Write: true, Value: value}, Call: h.since(call), Return: r})
}

// read records a fetch of partition p that returned value (-1: none).
func (h *grpHistory) read(client int, p int32, value int64, call, ret time.Time) {
	h.add(p, porcupine.Operation{ClientId: client, Input: grpRegOp{}, Output: value, Call: h.since(call), Return: h.since(ret)})
}

func (h *grpHistory) add(p int32, op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[p] = append(h.ops[p], op)
}

// grpRegisterModel is a register holding a committed offset, -1 before
// any commit.
func grpRegisterModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return int64(-1) },
		Step: func(state, input, output any) (bool, any) {
			in, st := input.(grpRegOp), state.(int64)
			if in.Write {
				return true, in.Value
			}
			return output.(int64) == st, st
		},
		Equal: func(a, b any) bool { return a.(int64) == b.(int64) },
		DescribeOperation: func(input, output any) string {
			if in := input.(grpRegOp); in.Write {
				return fmt.Sprintf("commit %d", in.Value)
			}
			return fmt.Sprintf("fetch -> %d", output.(int64))
		},
	}
}

// check runs porcupine per partition and returns the partitions whose
// history is not linearizable (or could not be decided in time).
func (h *grpHistory) check(timeout time.Duration) (bad []int32, ops int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, list := range h.ops {
		ops += len(list)
		if porcupine.CheckOperationsTimeout(grpRegisterModel(), list, timeout) != porcupine.Ok {
			bad = append(bad, p)
		}
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i] < bad[j] })
	return bad, ops
}

// The checker must be able to fail: a fetch that returns an offset older
// than one whose commit had completed before the fetch began is caught,
// and so is a fetch of a value never committed.
func TestGrpHistory_CatchesPlantedAnomalies(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	good := &grpHistory{start: at(0), ops: map[int32][]porcupine.Operation{}}
	good.read(9, 0, -1, at(1), at(2))
	good.commit(1, 0, 5, at(10), at(20), true)
	good.read(9, 0, 5, at(30), at(40))
	good.commit(2, 0, 7, at(50), time.Time{}, false) // outcome unknown: may land later
	good.read(9, 0, 5, at(60), at(70))
	good.read(9, 0, 7, at(80), at(90))
	if bad, _ := good.check(5 * time.Second); len(bad) != 0 {
		t.Fatalf("a linearizable history was rejected: %v", bad)
	}

	backwards := &grpHistory{start: at(0), ops: map[int32][]porcupine.Operation{}}
	backwards.commit(1, 3, 5, at(0), at(10), true)
	backwards.commit(1, 3, 7, at(20), at(30), true)
	backwards.read(9, 3, 5, at(40), at(50)) // 7 was committed before this fetch began
	if bad, _ := backwards.check(5 * time.Second); len(bad) != 1 || bad[0] != 3 {
		t.Fatalf("a committed offset going backwards was not caught: %v", bad)
	}

	phantom := &grpHistory{start: at(0), ops: map[int32][]porcupine.Operation{}}
	phantom.commit(1, 1, 5, at(0), at(10), true)
	phantom.read(9, 1, 6, at(20), at(30))
	if bad, _ := phantom.check(5 * time.Second); len(bad) != 1 {
		t.Fatalf("a fetch of a never-committed offset was not caught: %v", bad)
	}
}
