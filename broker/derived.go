package broker

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// derived is a value worked out from one part of the node's metadata
// view (its ACLs, its SCRAM users), kept until that part changes. The
// metadata replaces such a part with a new slice or map on every change
// and never writes one in place, so the same slice or map means the
// same source. It holds the source it was worked out from, so that the
// source's memory cannot be reused by a later one while cached. One
// caller works a stale value out while the others that find it stale
// wait for it, rather than each doing the same work at once.
type derived[S, T any] struct {
	p     atomic.Pointer[derivedFrom[S, T]]
	build sync.Mutex
}

type derivedFrom[S, T any] struct {
	src S
	val T
}

// get returns the value of src, working it out with work unless the
// cached one is of the same source (same reports that).
func (d *derived[S, T]) get(src S, same func(a, b S) bool, work func(S) T) T {
	if c := d.p.Load(); c != nil && same(c.src, src) {
		return c.val
	}
	d.build.Lock()
	defer d.build.Unlock()
	if c := d.p.Load(); c != nil && same(c.src, src) {
		return c.val
	}
	v := work(src)
	d.p.Store(&derivedFrom[S, T]{src: src, val: v})
	return v
}

// sameSlice reports whether a and b are the same slice of one array.
func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameMap reports whether a and b are the same map (not merely equal).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
