// Package testenv decides what a chaos test does when the machine lacks a
// privilege or tool it needs (root, iptables, ip, /dev/fuse).
//
// A missing prerequisite fails the test with the reason and how to fix
// it: a fault-injection suite that silently skips proves nothing. Under CI
// (CI set) it always fails. Elsewhere a developer who knows the machine
// cannot run these tests may set RAFTQ_SKIP_PRIVILEGED=1 to skip them
// with the same message.
package testenv
