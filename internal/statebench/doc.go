// Command statebench measures two ways of keeping a node's small
// per-partition state (checkpoints, producer state, epoch starts) at
// 1,000 partitions: one file per partition written by internal/durable
// (temp file, fsync, rename, directory fsync), or one badger/v4 database
// for the node with synced writes. It reports the restart time (open the
// store and read every partition's state), and the update rate and
// latency under a paced load; fsyncs are counted from outside with
// strace (BENCHMARKS.md has the commands and figures).
//
// It measures only: nothing in production imports it, and production
// keeps the durable files. Every update it reports is durable when it
// returns (a file after its directory fsync, a badger transaction with
// SyncWrites); a failed update stops the run with an error.
//
// Goroutines: main, a pacer that hands out one token per update due, and
// the writers, which own nothing but their latency samples until the
// run ends.
package main
