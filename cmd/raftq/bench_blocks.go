package main

import "slices"

// blocks is an append-only list of the bench's measurements, kept in
// blocks of blockLen values that, once allocated, are never copied or
// grown. One slice grown by doubling reached tens of MiB, and each
// doubling that fell in a GC cycle charged the allocating goroutine a
// mark assist: the bench's runtime trace showed the client idle for
// 20-125 ms at such moments, sending nothing, and the cluster idle with
// it, so the bench's p99 at 150k records/s measured the bench's own
// pauses, not the cluster (BENCHMARKS.md).
type blocks[T any] struct{ bs [][]T }

// blockLen is how many values one block holds (512 KiB of samples).
const blockLen = 1 << 15

func (b *blocks[T]) add(v T) {
	if n := len(b.bs); n == 0 || len(b.bs[n-1]) == blockLen {
		b.bs = append(b.bs, make([]T, 0, blockLen))
	}
	last := &b.bs[len(b.bs)-1]
	*last = append(*last, v)
}

func (b *blocks[T]) len() int {
	n := 0
	for _, blk := range b.bs {
		n += len(blk)
	}
	return n
}

// each calls f for every value in the order added.
func (b *blocks[T]) each(f func(T)) {
	for _, blk := range b.bs {
		for _, v := range blk {
			f(v)
		}
	}
}

// sortedValues returns f of every value in b, in ascending order.
func sortedValues[T any](b *blocks[T], f func(T) int64) []int64 {
	out := make([]int64, 0, b.len())
	b.each(func(v T) { out = append(out, f(v)) })
	slices.Sort(out)
	return out
}
