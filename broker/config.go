package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/tlsfiles"
	"github.com/raftq/raftq/raftgroup"
)

// Config configures one raftq node.
type Config struct {
	// NodeID is this node's id: non-zero, unique in the cluster, and a key
	// of InitialCluster.
	NodeID uint64
	// ClusterID names the cluster; nodes of another cluster are refused,
	// and a data dir made for another cluster or node refuses to start.
	ClusterID string
	// DataDir holds node.json, raft/ and log/ (layout: DESIGN.md).
	DataDir string

	// KafkaAddr, PeerAddr and AdminAddr are the listen addresses of the
	// Kafka API, node-to-node raft traffic and the admin HTTP server.
	KafkaAddr string
	PeerAddr  string
	AdminAddr string
	// Console, if set, makes the handler the admin port serves at / (and
	// every path no other admin handler takes), in place of the plain-text
	// index: the web console (package console), given the node.
	Console func(*Node) http.Handler
	// AdvertisedKafkaAddr is what Metadata tells clients; empty means
	// KafkaAddr (which then must not be a wildcard address).
	AdvertisedKafkaAddr string
	// KafkaListenerName names the KafkaAddr listener, which is
	// PLAINTEXT and the one brokers use among themselves (Kafka's
	// inter.broker.listener.name); default PLAINTEXT.
	KafkaListenerName string
	// Listeners are further Kafka listeners (listeners.go), each with its
	// own security protocol.
	Listeners []Listener
	// InterBrokerListener names the listener of Listeners that this node
	// sends other brokers its broker-to-broker requests on (Kafka's
	// inter.broker.listener.name: transaction markers and KIP-890
	// verifications); empty means the main PLAINTEXT one, as
	// User:ANONYMOUS. On a SASL listener the node authenticates with
	// InterBrokerSASL; on a TLS one it presents its SSL certificate and
	// verifies the other brokers' against SSL.CA (interbroker.go).
	InterBrokerListener string
	// InterBrokerSASL is the node's SASL identity on a SASL
	// InterBrokerListener.
	InterBrokerSASL SASLIdentity
	// SASLMechanisms are the mechanisms SASL listeners offer; empty
	// offers PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. Users are the SCRAM
	// credentials of the metadata (AlterUserScramCredentials); PLAIN
	// checks a password against them.
	SASLMechanisms []string
	// SASLReauth is Kafka's connections.max.reauth.ms (KIP-368): how long
	// a SASL session lasts before the client must authenticate again; 0
	// means as long as the connection.
	SASLReauth time.Duration
	// Authorizer turns Kafka ACL authorization on (authorize.go): every
	// request is checked against the metadata's ACLs, and CreateAcls,
	// DescribeAcls and DeleteAcls are served. Off, everyone may do
	// everything and the ACL APIs answer SECURITY_DISABLED, as Kafka
	// without authorizer.class.name.
	Authorizer bool
	// SuperUsers are principals ("User:admin") allowed everything
	// (Kafka's super.users).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is Kafka's
	// allow.everyone.if.no.acl.found: a resource no ACL covers is open
	// to all rather than to super users only.
	AllowEveryoneIfNoACLFound bool
	// SSL names the certificate, key and CA bundle of the SSL and
	// SASL_SSL listeners (Kafka's ssl.keystore and ssl.truststore, as PEM
	// files), reloaded on change or SIGHUP (listeners_tls.go). The main
	// listener stays PLAINTEXT.
	SSL tlsfiles.Files
	// SSLClientAuth is Kafka's ssl.client.auth for those listeners:
	// none (the default), requested or required. Anything but none needs
	// SSL.CA to verify client certificates against.
	SSLClientAuth string
	// SSLPrincipalMappingRules is Kafka's ssl.principal.mapping.rules: how
	// a verified client certificate's subject becomes a principal (see
	// auth.ParsePrincipalRules); empty means DEFAULT, the whole DN.
	SSLPrincipalMappingRules string

	// InitialCluster maps every node id to its peer address. The metadata
	// group (group 0) starts over the first 1, 3 or 5 of them by id (the
	// largest odd number not above the size, at most 5); the rest follow
	// it as learners. Empty with Seeds.
	InitialCluster map[uint64]string
	// Seeds are peer addresses of nodes of a running cluster, which this
	// node joins (join.go) instead of starting one from InitialCluster:
	// ClusterID may then be empty (learnt from a seed). A node whose data
	// dir holds a member's data restarts without them.
	Seeds []string
	// JoinTimeout bounds how long a joining node tries its seeds.
	JoinTimeout time.Duration
	// AdvertisedPeerAddr is the peer address other nodes dial; empty
	// means the one PeerAddr bound. A joining node must have one that is
	// not a wildcard.
	AdvertisedPeerAddr string
	// MetadataVoters is how many nodes vote in group 0: 1, 3 or 5; 0
	// means 5. Fewer nodes give as many voters as there are, rounded down
	// to odd. The metadata leader changes the voters to match (promoting
	// learners as nodes join, from the initial cluster's at first start),
	// by its own setting: give every node the same.
	MetadataVoters int
	// VoterReplaceAfter is how long a voter of group 0 must be dead
	// before the metadata leader replaces it with a live learner (0:
	// never).
	VoterReplaceAfter time.Duration

	// Fsync is the WAL fsync policy.
	Fsync raftgroup.FsyncPolicy
	// SharedWAL puts the raft log of every group on the node in one etcd
	// WAL (raftgroup.Config.SharedWAL).
	SharedWAL bool
	// AsyncStorageWrites lets raft groups go on stepping while their log
	// writes are in flight (raftgroup.Config.AsyncStorageWrites).
	AsyncStorageWrites bool
	// WALSegmentBytes is the preallocated size of each etcd WAL file.
	WALSegmentBytes int64
	// TickInterval, ElectionTicks and HeartbeatTicks set raft's clocks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEntries is how many applied entries trigger a raft snapshot.
	SnapshotEntries uint64

	// AutoCreateTopics creates unknown topics on Metadata and Produce, with
	// DefaultPartitions and DefaultReplicationFactor. Off by default.
	AutoCreateTopics         bool
	DefaultPartitions        int32
	DefaultReplicationFactor int16

	// MaxRequestBytes bounds one Kafka request frame.
	MaxRequestBytes int32
	// RetentionCheckInterval is how often partition leaders apply retention.
	RetentionCheckInterval time.Duration
	// LogCleanerBackoff is how often the log cleaner looks for compacted
	// partitions to clean (Kafka's log.cleaner.backoff.ms, 15 s).
	LogCleanerBackoff time.Duration
	// LogCleanerIOBytesPerSec bounds the cleaner's reads and writes
	// (Kafka's log.cleaner.io.max.bytes.per.second); 0 is unbounded.
	LogCleanerIOBytesPerSec float64
	// ReassignmentBytesPerSec bounds how fast this node streams snapshots
	// to the new replicas of moving partitions (raftgroup's
	// LearnerSnapshotBytesPerSec); zero is unbounded.
	ReassignmentBytesPerSec float64
	// LeaderBalanceInterval is how often a partition leader that is not
	// the partition's preferred replica hands leadership back to it (Kafka's
	// auto.leader.rebalance); zero disables it.
	LeaderBalanceInterval time.Duration
	// PartitionBalancer moves replicas and preferred leaderships until
	// every eligible broker holds about as many as the others, as after
	// a node joins (coordinator.ControllerConfig.PartitionBalancer).
	PartitionBalancer bool

	// OffsetsPartitions is the partition count of __consumer_offsets,
	// created on the first group request (with replication factor
	// min(3, cluster size)); later changes do not move existing groups. Each partition is a raft group whose leader coordinates the
	// groups that hash to it.
	OffsetsPartitions int32
	// OffsetsRetention is how long the offsets of an empty group are kept
	// (Kafka's offsets.retention.minutes).
	OffsetsRetention time.Duration
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound consumer
	// session timeouts; GroupInitialRebalanceDelay is how long the first
	// rebalance of an empty group waits for more members; and
	// GroupMaxMetadataBytes bounds a member's protocol metadata and
	// assignment.
	GroupMinSessionTimeout     time.Duration
	GroupMaxSessionTimeout     time.Duration
	GroupInitialRebalanceDelay time.Duration
	GroupMaxMetadataBytes      int

	// TransactionPartitions is the partition count of __transaction_state
	// (Kafka's transaction.state.log.num.partitions, 50 there; as many as
	// __consumer_offsets here), created on the first transactional
	// request with replication factor min(3, cluster size). Each
	// partition is a raft group whose leader coordinates the
	// transactional ids that hash to it.
	TransactionPartitions int32
	// TransactionMaxTimeout is transaction.max.timeout.ms: a producer's
	// longer transaction.timeout.ms gets INVALID_TRANSACTION_TIMEOUT.
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms: how
	// long an idle transactional id with no open transaction is kept.
	TransactionalIDExpiration time.Duration
	// txnMarkerAddr, set by tests only, names the Kafka address that
	// WriteTxnMarkers for the partitions a broker leads go to, instead of
	// its listener (txn_markers_send.go).
	txnMarkerAddr func(broker uint64) string

	// UnsafeAckBeforeCommit answers acks=all produce requests as soon as the
	// leader has appended the batch to its own WAL, before raft commits it.
	// It exists only to prove that jepsen/ catches the lost writes it
	// causes; never use it otherwise.
	UnsafeAckBeforeCommit bool
	// UnsafeSkipCRCChecks makes partition recovery trust the segment
	// files below their recovery point (partition.Config's): a damaged
	// batch there is served. It exists only to prove that jepsen/
	// catches what the checks prevent; never use it otherwise.
	UnsafeSkipCRCChecks bool

	// ReplicaLagTimeMax is Kafka's replica.lag.time.max.ms: an ISR-mode
	// follower not caught up for longer leaves the ISR, and a raft voter
	// behind its leader for longer counts as under-replicated.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchWaitMax is Kafka's replica.fetch.wait.max.ms: how long
	// an ISR leader holds a follower fetch that finds nothing new.
	ReplicaFetchWaitMax time.Duration
	// EligibleLeaderReplicas turns on KIP-966 for ISR partitions; the
	// metadata leader proposes it to group 0 when the cluster's feature
	// differs, so the metadata leader's flag wins: give every node the
	// same.
	EligibleLeaderReplicas bool
	// BrokerConfigs are Kafka broker configs by Kafka's names, as a
	// server.properties sets them: the defaults of topic configs
	// (coordinator.BrokerConfigNames: log.retention.ms,
	// log.cleanup.policy, min.insync.replicas, ...). The metadata leader
	// writes the defaults its own give into group 0, where every node
	// reads them (coordinator.SetTopicDefaults): give every node the
	// same.
	BrokerConfigs map[string]string

	// PeerTLS names the node's certificate and key and the cluster's CA
	// bundle: with them the peer transport requires mutual TLS on every
	// connection, and a node whose certificate does not chain to the CA
	// is refused before the peer handshake (node_tls.go). All three or
	// none.
	PeerTLS tlsfiles.Files
	// PeerTLSNodeName, with PeerTLS, is the name node N's certificate
	// must carry, as its common name or a DNS name, with %d standing for
	// N (e.g. "node-%d.raftq"): a certificate of the CA then stands for
	// its own node only. Empty accepts any certificate of the CA for any
	// node.
	PeerTLSNodeName string
	// AdminTLS names the admin listener's certificate and key, and a CA
	// bundle: with them it serves HTTPS, and this node's own calls to
	// other nodes' admin listeners present the certificate and verify
	// theirs against the CA (the system roots without one).
	AdminTLS tlsfiles.Files
	// AdminRequireClientCert makes the admin listener refuse, at the TLS
	// handshake, clients without a certificate from AdminTLS.CA.
	AdminRequireClientCert bool

	Logger *slog.Logger
}

// DefaultConfig returns the defaults of a single-node cluster on the
// standard ports (Kafka 9092, peer 9093, admin 9644).
func DefaultConfig() Config {
	return Config{
		NodeID:                   1,
		ClusterID:                "raftq",
		DataDir:                  "raftq-data",
		KafkaAddr:                "127.0.0.1:9092",
		KafkaListenerName:        ProtocolPlaintext,
		PeerAddr:                 "127.0.0.1:9093",
		AdminAddr:                "127.0.0.1:9644",
		InitialCluster:           map[uint64]string{1: "127.0.0.1:9093"},
		JoinTimeout:              time.Minute,
		VoterReplaceAfter:        10 * time.Minute,
		Fsync:                    raftgroup.FsyncAlways,
		SharedWAL:                true,
		WALSegmentBytes:          4 << 20,
		TickInterval:             100 * time.Millisecond,
		ElectionTicks:            10,
		HeartbeatTicks:           1,
		SnapshotEntries:          10000,
		DefaultPartitions:        1,
		DefaultReplicationFactor: 3,
		MaxRequestBytes:          100 << 20,
		RetentionCheckInterval:   30 * time.Second,
		LogCleanerBackoff:        15 * time.Second,
		LeaderBalanceInterval:    10 * time.Second,
		ReplicaLagTimeMax:        30 * time.Second,
		ReplicaFetchWaitMax:      500 * time.Millisecond,

		OffsetsPartitions:          5,
		OffsetsRetention:           7 * 24 * time.Hour,
		GroupMinSessionTimeout:     6 * time.Second,
		GroupMaxSessionTimeout:     30 * time.Minute,
		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMaxMetadataBytes:      1 << 20,

		TransactionPartitions:     5,
		TransactionMaxTimeout:     15 * time.Minute,
		TransactionalIDExpiration: 7 * 24 * time.Hour,
	}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("broker: node id must be non-zero")
	case c.ClusterID == "" && len(c.Seeds) == 0:
		return errors.New("broker: cluster id is required")
	case c.DataDir == "":
		return errors.New("broker: data dir is required")
	case len(c.Seeds) == 0 && c.InitialCluster[c.NodeID] == "":
		return fmt.Errorf("broker: node %d is not in the initial cluster %s", c.NodeID, FormatCluster(c.InitialCluster))
	case c.WALSegmentBytes < 64<<10:
		return fmt.Errorf("broker: WAL segment bytes %d below 64 KiB", c.WALSegmentBytes)
	case c.DefaultPartitions < 1 || c.DefaultReplicationFactor < 1:
		return errors.New("broker: default partitions and replication factor must be positive")
	case c.ReplicaLagTimeMax <= 0:
		return fmt.Errorf("broker: replica lag time max %s must be positive", c.ReplicaLagTimeMax)
	case c.ReplicaFetchWaitMax <= 0:
		return fmt.Errorf("broker: replica fetch wait max %s must be positive", c.ReplicaFetchWaitMax)
	case c.LogCleanerBackoff <= 0:
		return fmt.Errorf("broker: log cleaner backoff %s must be positive", c.LogCleanerBackoff)
	case c.ReassignmentBytesPerSec < 0:
		return fmt.Errorf("broker: reassignment bound %g bytes/s is negative", c.ReassignmentBytesPerSec)
	case c.LogCleanerIOBytesPerSec < 0:
		return fmt.Errorf("broker: log cleaner I/O bound %g bytes/s is negative", c.LogCleanerIOBytesPerSec)
	}
	if err := c.validateGroups(); err != nil {
		return err
	}
	if err := c.validateTxns(); err != nil { // txn_coordinator.go
		return err
	}
	if err := c.validateMembership(); err != nil { // join.go
		return err
	}
	if _, err := coordinator.ResolveTopicDefaults(c.BrokerConfigs); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	for name, addr := range map[string]string{"kafka": c.KafkaAddr, "peer": c.PeerAddr, "admin": c.AdminAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("broker: %s address %q: %w", name, addr, err)
		}
	}
	if _, err := c.advertisedKafka(); err != nil {
		return err
	}
	if err := c.validateTLS(); err != nil { // node_tls.go
		return err
	}
	if err := c.validateAuthorizer(); err != nil { // authorize.go
		return err
	}
	if err := c.validateListeners(); err != nil { // listeners.go
		return err
	}
	return c.validateInterBroker() // interbroker.go
}

func (c *Config) advertisedKafka() (string, error) {
	addr := c.AdvertisedKafkaAddr
	if addr == "" {
		addr = c.KafkaAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("broker: advertised kafka address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("broker: advertised kafka address %q is a wildcard; set --advertise-kafka-addr", addr)
	}
	return addr, nil
}

func (c *Config) nodeIDs() []uint64 {
	ids := make([]uint64, 0, len(c.InitialCluster))
	for id := range c.InitialCluster {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ParseCluster parses "1=host:port,2=host:port".
func ParseCluster(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idStr, addr, ok := strings.Cut(part, "=")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || err != nil || id == 0 {
			return nil, fmt.Errorf("initial cluster entry %q: want id=host:port with a non-zero id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("initial cluster entry %q: %w", part, err)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("initial cluster: node %d listed twice", id)
		}
		out[id] = addr
	}
	if len(out) == 0 {
		return nil, errors.New("initial cluster is empty")
	}
	return out, nil
}

// FormatCluster is the inverse of ParseCluster.
func FormatCluster(m map[uint64]string) string {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%s", id, m[id])
	}
	return strings.Join(parts, ",")
}
