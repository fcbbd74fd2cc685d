// Package logging adapts log/slog to the logger interfaces that raftq's
// dependencies demand: go.etcd.io/raft/v3's raft.Logger and the *zap.Logger
// that etcd's storage/wal and etcdserver/api/snap take.
//
// Library code never calls slog.Default(); a nil *slog.Logger means discard.
package logging
