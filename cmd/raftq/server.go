package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/raftgroup"
)

// serverFlags binds the flags of one node into a broker.Config.
type serverFlags struct {
	cfg      broker.Config
	cluster  string
	fsync    string
	wal      string
	logLevel string
	// brokerConfigs, when set, fills cfg.BrokerConfigs (dev sets
	// cfg.BrokerConfigs itself, the same for every node).
	brokerConfigs *brokerConfigFlags
	// shutdownTimeout bounds the leadership drain on SIGTERM (0: none).
	shutdownTimeout time.Duration
	join            joinFlags         // server_join.go
	listeners       *listenerFlags    // server_listeners.go
	nodeTLS         *nodeTLSFlags     // server_peer_tls.go
	interBroker     *interBrokerFlags // server_interbroker.go
}

const walUsage = "raft log layout: shared (one etcd WAL per node, whose groups share fsyncs) or group (an etcd WAL per raft group)"

const asyncUsage = "raft groups keep stepping while their log writes are in flight (a leader commits during its own fsync)"

func walMode(shared bool) string {
	if shared {
		return "shared"
	}
	return "group"
}

func bindServerFlags(fs *pflag.FlagSet) *serverFlags {
	f := &serverFlags{cfg: broker.DefaultConfig()}
	c := &f.cfg
	fs.Uint64Var(&c.NodeID, "node-id", c.NodeID, "this node's id (non-zero, unique in the cluster)")
	fs.StringVar(&c.ClusterID, "cluster-id", c.ClusterID, "cluster name; nodes of other clusters are refused")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the node's WALs, logs and identity")
	fs.StringVar(&c.KafkaAddr, "kafka-addr", c.KafkaAddr, "Kafka API listen address")
	fs.StringVar(&c.AdvertisedKafkaAddr, "advertise-kafka-addr", "", "Kafka address given to clients (default: --kafka-addr)")
	fs.StringVar(&c.PeerAddr, "peer-addr", c.PeerAddr, "node-to-node raft listen address")
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "admin HTTP address (/metrics, /v1/status, /debug/pprof)")
	fs.StringVar(&f.cluster, "initial-cluster", "", "every node as id=peer-host:port, comma separated (default: this node alone)")
	fs.StringVar(&f.fsync, "fsync", "always", "partition WAL fsync policy: always or never (never can lose acknowledged writes on power loss; the metadata log is always fsynced)")
	fs.StringVar(&f.wal, "wal", walMode(c.SharedWAL), walUsage)
	fs.BoolVar(&c.AsyncStorageWrites, "async-writes", c.AsyncStorageWrites, asyncUsage)
	fs.BoolVar(&c.AutoCreateTopics, "auto-create-topics", false, "create unknown topics on Metadata requests")
	fs.Int32Var(&c.DefaultPartitions, "default-partitions", c.DefaultPartitions, "partitions of auto-created topics")
	fs.Int16Var(&c.DefaultReplicationFactor, "default-replication-factor", c.DefaultReplicationFactor, "replication factor of topics created without one")
	fs.Int64Var(&c.WALSegmentBytes, "wal-segment-bytes", c.WALSegmentBytes, "preallocated size of each raft WAL file")
	fs.DurationVar(&c.TickInterval, "tick-interval", c.TickInterval, "raft tick length")
	fs.IntVar(&c.ElectionTicks, "election-ticks", c.ElectionTicks, "raft election timeout in ticks")
	fs.Uint64Var(&c.SnapshotEntries, "snapshot-entries", c.SnapshotEntries, "applied entries between raft snapshots")
	fs.DurationVar(&c.RetentionCheckInterval, "retention-check-interval", c.RetentionCheckInterval, "how often leaders apply retention")
	fs.DurationVar(&c.LeaderBalanceInterval, "leader-balance-interval", c.LeaderBalanceInterval, "how often leaders hand partitions back to their preferred replica (0 disables)")
	fs.BoolVar(&c.PartitionBalancer, "partition-balancer", c.PartitionBalancer, "move replicas and preferred leaderships until every node holds about as many as the others, as after a node joins (the metadata leader's flag acts)")
	fs.Int32Var(&c.OffsetsPartitions, "offsets-partitions", c.OffsetsPartitions, "partitions of __consumer_offsets (each a raft group coordinating the groups that hash to it)")
	fs.DurationVar(&c.OffsetsRetention, "offsets-retention", c.OffsetsRetention, "how long an empty consumer group's offsets are kept")
	fs.DurationVar(&c.GroupMinSessionTimeout, "group-min-session-timeout", c.GroupMinSessionTimeout, "smallest consumer session timeout accepted")
	fs.DurationVar(&c.GroupMaxSessionTimeout, "group-max-session-timeout", c.GroupMaxSessionTimeout, "largest consumer session timeout accepted")
	fs.DurationVar(&c.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", c.GroupInitialRebalanceDelay, "how long a new group's first rebalance waits for more members")
	fs.IntVar(&c.GroupMaxMetadataBytes, "group-max-metadata-bytes", c.GroupMaxMetadataBytes, "largest member metadata or assignment in JoinGroup/SyncGroup")
	fs.Int32Var(&c.TransactionPartitions, "transaction-partitions", c.TransactionPartitions, "partitions of __transaction_state (each a raft group coordinating the transactional ids that hash to it)")
	fs.DurationVar(&c.TransactionMaxTimeout, "transaction-max-timeout", c.TransactionMaxTimeout, "largest transaction.timeout.ms a transactional producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&c.TransactionalIDExpiration, "transactional-id-expiration", c.TransactionalIDExpiration, "how long an idle transactional id is kept (transactional.id.expiration.ms)")
	bindReplicationFlags(fs, c)
	bindJoinFlags(fs, f)
	f.listeners = bindListenerFlags(fs, c)
	f.nodeTLS = bindNodeTLSFlags(fs, c)
	f.interBroker = bindInterBrokerFlags(fs, c)
	bindAuthorizerFlags(fs, c) // server_acl.go
	bindSSLFlags(fs, c)        // server_tls.go
	f.brokerConfigs = bindBrokerConfigFlags(fs)
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, shutdownTimeoutUsage)
	fs.BoolVar(&c.UnsafeAckBeforeCommit, "unsafe-ack-before-commit", false, "answer acks=all before raft commit (for testing the checkers only)")
	_ = fs.MarkHidden("unsafe-ack-before-commit")
	fs.BoolVar(&c.UnsafeSkipCRCChecks, "unsafe-skip-crc-checks", false, "trust partition segments below their recovery point at start, unchecked (for testing the checkers only)")
	_ = fs.MarkHidden("unsafe-skip-crc-checks")
	return f
}

// bindReplicationFlags binds the replication flags server and dev share:
// the ISR mode's Kafka settings and the lag time that raft topics' ISR in
// Metadata uses too, and the log cleaner's pace.
func bindReplicationFlags(fs *pflag.FlagSet, c *broker.Config) {
	fs.DurationVar(&c.LogCleanerBackoff, "log-cleaner-backoff", c.LogCleanerBackoff, "how often the log cleaner looks for compacted partitions to clean (Kafka's log.cleaner.backoff.ms)")
	fs.Float64Var(&c.ReassignmentBytesPerSec, "reassignment-bytes-per-sec", c.ReassignmentBytesPerSec, "bound on how fast this node sends the log of a moving partition to its new replicas, bytes per second; 0 is unbounded (Kafka's throttled replication rate)")
	fs.Float64Var(&c.LogCleanerIOBytesPerSec, "log-cleaner-io-bytes-per-sec", c.LogCleanerIOBytesPerSec, "bound on the log cleaner's reads and writes, bytes per second; 0 is unbounded (Kafka's log.cleaner.io.max.bytes.per.second)")
	fs.DurationVar(&c.ReplicaLagTimeMax, "replica-lag-time-max", c.ReplicaLagTimeMax,
		"Kafka's replica.lag.time.max.ms: an isr topic's follower not caught up with its leader for this long leaves the ISR; a raft topic's voter behind its leader for this long leaves the ISR that Metadata reports and counts as under-replicated")
	fs.DurationVar(&c.ReplicaFetchWaitMax, "replica-fetch-wait-max", c.ReplicaFetchWaitMax,
		"Kafka's replica.fetch.wait.max.ms: how long an isr topic's leader holds a follower's fetch that finds no new data")
	fs.BoolVar(&c.EligibleLeaderReplicas, "eligible-leader-replicas", c.EligibleLeaderReplicas,
		"KIP-966 eligible leader replicas for isr topics (strict min ISR, elections from replicas that left the ISR below min.insync.replicas); a cluster-wide feature: the metadata leader's flag wins, so give every node the same")
}

// config finishes the Config from the string flags.
func (f *serverFlags) config(logger *slog.Logger) (broker.Config, error) {
	c := f.cfg
	if f.cluster == "" {
		c.InitialCluster = map[uint64]string{c.NodeID: c.PeerAddr}
	} else {
		m, err := broker.ParseCluster(f.cluster)
		if err != nil {
			return c, usageError{fmt.Errorf("--initial-cluster: %w", err)}
		}
		c.InitialCluster = m
	}
	if err := f.joinConfig(&c); err != nil {
		return c, err
	}
	if f.listeners != nil {
		if err := f.listeners.apply(&c); err != nil {
			return c, err
		}
	}
	if f.nodeTLS != nil {
		if err := f.nodeTLS.apply(&c); err != nil {
			return c, err
		}
	}
	if f.interBroker != nil {
		if err := f.interBroker.apply(&c); err != nil {
			return c, err
		}
	}
	switch f.fsync {
	case "always":
		c.Fsync = raftgroup.FsyncAlways
	case "never":
		c.Fsync = raftgroup.FsyncNever
	default:
		return c, usageError{fmt.Errorf("--fsync %q: want always or never", f.fsync)}
	}
	switch f.wal {
	case "group":
		c.SharedWAL = false
	case "shared":
		c.SharedWAL = true
	default:
		return c, usageError{fmt.Errorf("--wal %q: want group or shared", f.wal)}
	}
	if f.brokerConfigs != nil {
		bc, err := f.brokerConfigs.configs()
		if err != nil {
			return c, err
		}
		c.BrokerConfigs = bc
	}
	c.Logger = logger
	if err := c.Validate(); err != nil {
		return c, usageError{err}
	}
	return c, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", s)}
	}
	return l, nil
}

func runServer(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "server", "")
	f := bindServerFlags(fs)
	cons := bindConsoleFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := f.config(logger)
	if err != nil {
		return err
	}
	cfg.Console = cons.hook(logger)
	logHUPs(ctx, logger, !cfg.SSL.Empty() || !cfg.PeerTLS.Empty() || !cfg.AdminTLS.Empty())
	n, closeNode, err := openNode(cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down")
	drainNode(n, f.shutdownTimeout)
	return closeNode()
}
