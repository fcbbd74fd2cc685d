// Package periodic runs work on a fixed period until a context ends: the
// shape of every housekeeping loop of a node. Every returns only once ctx
// is done, and never runs fn concurrently with itself.
package periodic
