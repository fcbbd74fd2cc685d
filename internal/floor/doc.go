// Package floor measures the least latency a replicated, fsynced append
// can have on this machine: the baseline to read `raftq bench` against.
//
// Run starts a few nodes in the calling process. Each owns one file,
// fallocated up front as etcd's WAL preallocates its segments, and one
// flusher goroutine that writes everything queued and fdatasyncs it: group
// commit, as raftq's node WAL does. Partitions have their leaders spread
// over the nodes. Every millisecond each partition's leader appends a batch
// to its own file and, at the same moment, sends it to every other node
// over loopback TCP; a node acknowledges a batch once its fdatasync is
// done, and a batch commits when a majority of nodes, the leader's own
// write counted, have it on disk.
//
// That is the disk and network work of a raft commit and nothing else: no
// raft, no Kafka, no apply, no partition log. A produce through raftq does
// all of it and more, so its latency on the same disk and cores should not
// be expected below the floor's; the distance above it is what the rest of
// the path costs. Latency runs from when a batch was due on the fixed
// schedule, so a generator that falls behind shows in the figures, and
// batches carry random bytes, so that nothing below finds them cheap.
//
// Goroutines: the caller's goroutine generates batches; each node runs a
// flusher; each leader-to-follower link runs a writer and an
// acknowledgement reader on the leader's side and a reader and a writer on
// the follower's. A batch's acknowledgement count is atomic; its latency
// slot is written once, by whichever acknowledgement makes the quorum.
package floor
