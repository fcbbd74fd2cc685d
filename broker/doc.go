// Package broker is one raftq node: it wires the raft host, the peer
// transport, the cluster metadata (group 0), the local partition replicas
// and the Kafka listener, and serves one Kafka API per file (produce.go,
// fetch.go, metadata.go, ...).
//
// # Data flow
//
// Produce: the Kafka server calls serveProduce on the connection's reader
// goroutine, in arrival order. Each partition's batch is validated
// (partition.ValidateBatch), recompressed if the topic's compression.type
// names another codec than the batch's (partition.Recompress, as Kafka's
// broker does), stamped with the leader's clock if its
// message.timestamp.type is LogAppendTime, and appended to the
// partition's replication under the partition's produceMu, so appends
// keep arrival order; a goroutine then waits for the commit (acks=all) or
// for the leader's durable append (acks=1, when the replication knows the
// offset by then: in raft mode from the leader's projection,
// projection.go).
//
// # The replication seam
//
// The Kafka API files see a data partition only through the replication
// interface (replication.go): leadership (leader, epoch, settling), the
// local partition.Log, an Append (told whether the producer waits for the
// commit) with an appended and a committed stage, AdvanceStart,
// TransferLeadership, epochs and CaughtUp. The raft mode implements it in
// replication_raft.go, the only place that turns a raft term into a leader
// epoch and raftgroup's errors into the broker's; arch_test.go keeps raft
// out of every other broker file but the node's wiring and control plane.
// The ISR mode (replication.mode=isr) implements it in
// replication_isr.go over an isr.Partition, the only place that maps
// isr's errors; isr_node.go wires the node's isr.Manager (made at first
// need) to the peer transport's fetch stream and to group 0, through
// which the ISR leader proposes AlterPartition. Fakes of the seam
// (replication_fake_test.go) test produce, fetch and ListOffsets on their
// own.
//
// A replica is of one of three kinds (replica.go): a data partition, a
// __consumer_offsets partition, whose raft group applies to the consumer
// groups' machine, or a __transaction_state partition, whose raft group
// applies to the transaction coordinator's machine (coordinator/txns);
// the last two have no record log, and the data APIs answer for them as
// for an empty partition.
//
// # Transaction coordinator
//
// txn_*.go host coordinator/txns as group_coordinator.go hosts
// coordinator/groups: __transaction_state (Config.TransactionPartitions,
// replication.mode=raft whatever the cluster default) is created on the
// first transactional request (requestInternalTopic); the groups loop
// activates a partition's txns.Coordinator with a Barrier when this node
// leads its raft group, ticks it every 100 ms (timeouts, id expiry,
// producer id grants, marker retries) and deactivates it on loss. Until
// the Barrier of the current term is applied the APIs answer
// COORDINATOR_LOAD_IN_PROGRESS; on another node NOT_COORDINATOR.
// FindCoordinator (key type 1), InitProducerId with a transactional id,
// AddPartitionsToTxn v0-v5, AddOffsetsToTxn, EndTxn v0-v4 (v5 is KIP-890
// part 2, not modelled), DescribeTransactions and ListTransactions are
// answered there, each code through txns.ClientCode. Markers
// (txn_markers_send.go): the coordinator's WriteMarkers sends WriteTxnMarkers
// to each partition leader's Kafka listener, one request per leader,
// over a kgo client per broker address (txn_client.go, which negotiates
// versions); what is not acknowledged is retried at the next Tick and,
// after a failover, by the next leader. The transaction's groups get
// the marker too, at the leader of __consumer_offsets partition
// PartitionFor(group, n) (txn_markers_send.go); a group is done once
// that partition answered NONE. TxnOffsetCommit (offsets_txn.go, v0-v3)
// is served by the group's coordinator: the offsets wait pending
// (coordinator/groups) until the marker; OffsetFetch with require_stable
// answers UNSTABLE_OFFSET_COMMIT for them meanwhile. As Kafka 3.x, the
// group coordinator does not ask the transaction coordinator whether
// AddOffsetsToTxn added the group (KIP-890 part 2 would).
// askTxnCoordinator (txn_verify.go) is KIP-890's produce-time check: a verify-only
// AddPartitions through the local coordinator's log, or
// AddPartitionsToTxn v4+ verify-only to the coordinator's node.
//
// Fetch reads up to the local replica's high watermark (in raft mode its
// applied log end), or for read_committed its last stable offset;
// followers serve reads too. Long polls wait on the
// logs' high-watermark channels. The records are copied into the response
// (Log.Read: whole batches from one segment, none at or above the high
// watermark); sending them by sendfile was measured no faster and removed
// (BENCHMARKS.md, "Fetch: zero copy measured and removed").
//
// # Transactions: the partition side
//
// The transaction coordinator (its broker side hosts __transaction_state)
// and the partitions meet only over the Kafka protocol and one Node field,
// txnVerify:
//
//   - Produce (produce.go) takes transactional batches when the request
//     names a transactional id (else the whole request is
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka) and refuses a
//     client's control batch (INVALID_RECORD). Before the leader appends
//     a producer's first transactional batch of a transaction it calls
//     Node.txnVerify (KIP-890; nil verifies nothing) and keeps what passed
//     as a guard per producer (produce_txn.go, txnGuards, under
//     produceMu) until a marker ends the transaction; a batch whose guard
//     a marker voided while it was verified is refused
//     (INVALID_TXN_STATE) rather than opening a hanging transaction. The
//     partition refuses an older producer epoch and a plain batch of a
//     producer with a transaction open (partition/doc.go).
//   - WriteTxnMarkers (txn_markers.go), on every node: each marker is
//     partition.ControlBatch, appended to every listed partition this
//     node leads through its replication like an acks=all produce batch
//     (never recompressed), and answered once committed; per partition
//     NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
//     INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS as Kafka. Markers are
//     not deduplicated; a repeated one changes nothing. A marker for a
//     __consumer_offsets partition is proposed by its leader's group
//     coordinator as groups.TxnMarker, which commits or drops the
//     producer's pending offsets in every group of the partition, and is
//     answered NONE once applied (COORDINATOR_LOAD_IN_PROGRESS while the
//     coordinator loads; the transaction coordinator sends it again).
//   - Fetch with isolation_level read_committed (v4+) reads up to the
//     partition's last stable offset (Log.ReadLimit), long-polls on its
//     LSO channel, and returns the aborted transactions overlapping
//     [fetch offset, end of the last returned batch)
//     (Log.AbortedTransactions); LastStableOffset is filled at both
//     levels. ListOffsets READ_COMMITTED answers the LSO for latest.
//   - DescribeProducers (describeproducers.go), leader only: the
//     replica's producers (replication.Producers) with the first offset
//     of each open transaction; coordinator epochs are not kept (-1).
//
// # Listeners and SASL
//
// Config.KafkaAddr is the PLAINTEXT listener the nodes use among
// themselves (markers, KIP-890 verification) and the one registered as
// Broker.KafkaAddr. Config.Listeners adds more (listeners.go), each a
// transport server named after its listener; with several, the
// registration carries every listener's advertised address
// (Broker.Listeners), and Metadata, DescribeCluster, FindCoordinator and
// produce leader hints answer with those of the listener the request came
// in on (kafka.Conn.Listener). A SASL_PLAINTEXT listener authenticates in
// the transport (transport/kafka, package auth) against this node's view
// of the metadata's SCRAM users (coordinator.State.ScramUsers), read anew
// for each authentication; a user made on another node may take the
// metadata's propagation to be usable here.
//
// # Authorization
//
// With Config.Authorizer, every request is authorized against this
// node's view of the metadata's ACLs (coordinator.State.ACLs, indexed
// once per change of them: aclIndex) by package auth's Authorizer, as principal kafka.Conn.Principal
// (User:ANONYMOUS on PLAINTEXT) from the client's IP. authzRules
// (authorize_rules.go) holds one rule per routed API key, after Kafka's
// KafkaApis: a whole-request check (CLUSTER operations, the group, the
// transactional id), a check per entry of a request list (topics,
// groups, config resources: a refused entry is answered with its
// *_AUTHORIZATION_FAILED code and the handler never sees it), and a
// response filter (list-all requests show only what may be described).
// Metadata authorizes in its handler (metadata_authz.go): a list of all
// topics leaves out those the principal may not DESCRIBE; a named one is
// answered TOPIC_AUTHORIZATION_FAILED whether it exists or not, and is
// auto-created only with CREATE. Invariants: a routed API without a rule
// fails TestAuthzRules_EveryRoute; with the authorizer off no rule runs
// and the ACL APIs answer SECURITY_DISABLED; every refusal of a request
// or entry the client named is logged once at Info with component=audit
// (principal, host, API, resource type and name, operation) and counted
// in raftq_authorization_denied_total{api,resource_type}; what a
// list-all request merely does not see is neither. KIP-430's authorized
// operations (Metadata, DescribeGroups, DescribeCluster) answer what the
// principal may do among Kafka's supported operations of the resource
// type, every one with the authorizer off, as Kafka.
//
// Nodes send each other WriteTxnMarkers and KIP-890 verifications over
// Config.InterBrokerListener (interbroker.go), by default the PLAINTEXT
// main listener as User:ANONYMOUS; as in Kafka, that principal then
// needs CLUSTER_ACTION on the cluster: an ACL allowing it from the
// nodes' hosts (README, "ACLs"). On a SASL inter-broker listener a node
// authenticates as Config.InterBrokerSASL, on a TLS one with its SSL
// certificate, so their principal can be a super user instead.
//
// # TLS between nodes
//
// Config.PeerTLS (certificate, key and the cluster's CA, all three) puts
// every peer connection under mutual TLS; Config.AdminTLS serves the
// admin listener over HTTPS, refusing clients without a certificate from
// its CA when AdminRequireClientCert (node_tls.go). Invariants:
//
//   - Each is a tlsfiles.Store loaded before anything listens or dials,
//     so a node that cannot read its files never starts; for the node's
//     life a loop reloads it on file change or SIGHUP, logging each
//     reload, and a reload that fails keeps the previous certificate.
//   - The peer transport verifies the chain (transport/peer, TLS) and,
//     with Config.PeerTLSNodeName, that the certificate is named for the
//     node id it stands for; a peer refused at the TLS handshake never
//     reaches its hello, and is
//     counted in /metrics (raftq_peer_handshakes_refused_total, stage
//     tls), as the admin listener's refusals are
//     (raftq_admin_tls_handshakes_refused_total).
//   - Join streams use the peer TLS config; a seed's certificate verdict
//     (peer.ErrCertificate) ends the join at once, as a refusal does.
//   - The node's own calls to other nodes' admin listeners (leader
//     transfers, the web console's) speak HTTPS with the admin
//     certificate when AdminTLS is set: every node's admin flags must
//     agree.
//
// SSL and SASL_SSL listeners (listeners_tls.go) share one certificate
// store (Config.SSL, package internal/tlsfiles), loaded before the node
// touches its data directory, so a missing or broken certificate changes
// nothing. The store reloads on file change or SIGHUP; each handshake
// uses the current pair, connections already open keep theirs, and a
// failed reload keeps the previous pair (logged). Config.SSLClientAuth
// is Kafka's ssl.client.auth (Listener.SSLClientAuth its per-listener
// override); a verified client certificate's subject is
// mapped to the connection's principal by Config.SSLPrincipalMappingRules
// unless SASL names one. Failed handshakes are counted in
// raftq_tls_handshake_failures_total.
//
// # Leadership
//
// A raft partition's leader is its raft group's leader and the leader
// epoch is the raft term. Nodes that host a replica know it from their
// raft status; every other node learns it from leadership hints that
// leaders propose to the metadata group (loops.go). Metadata answers may
// lag an election by a moment; clients retry on NOT_LEADER_OR_FOLLOWER,
// which carries the new leader (KIP-951) where known.
//
// An ISR partition's leader, leader epoch and ISR are group 0's: it
// elects them at apply, and every node answers Metadata and
// DescribeTopicPartitions from its metadata (metadata_isr.go, leaderOf).
// Reconcile passes each change to the local replica (isr.State), which
// then leads, follows or waits; no hint is proposed for it, and leader
// balance moves it by a preferred election (ElectLeaders) once its
// preferred replica is back in the ISR.
//
// ElectLeaders (electleaders.go), on any node: an ISR partition's
// election is one ElectLeaders command to group 0, preferred or unclean
// (unclean elects a live replica outside an ISR that has nobody to
// lead, whatever the topic's unclean.leader.election.enable); a raft
// partition's preferred election is a leadership transfer to its first
// replica, which only its raft leader can make: the answering node makes
// it if it leads, else asks the leader it knows through that node's
// admin API (POST /v1/raft/{group}/transfer_leadership,
// electleaders_raft.go) and follows the answer's leader if leadership
// moved, and answers once the transfer took effect and its own
// metadata names the new leader, or at the request's timeout. Raft
// never elects uncleanly, so an unclean election of a raft partition is
// INVALID_REQUEST.
//
// Maintenance mode (maintenance.go): while group 0 has this node in
// maintenance, a loop hands every raft leadership the node holds to
// another replica and group 0's to another voter, with the drain's
// steps but no controlled shutdown: the node keeps serving and stays in
// every ISR, whose leaderships group 0 moved at apply. Invariants: no
// leader balance, preferred election or drain hands a leadership to a
// broker in maintenance while another eligible replica exists
// (coordinator.Broker.TakesLeadership); a leadership raft gives it
// anyway is handed over at the loop's next round (maintenancePoll); a
// node in maintenance does not stand first for a new partition and
// nobody holds an election for it (electionHold).
//
// ISR of a raft topic in Metadata (insync_raft.go): the replicas whose
// log is within ReplicaLagTimeMax of the leader's, as the leader's node
// sees from raft's progress; other nodes list every live replica.
// raftq_under_replicated_partitions{mode="raft"} counts the partitions
// led here with a replica out of sync by that rule.
//
// Topic configs: CreateTopics and both AlterConfigs check the rules that
// apply cannot (coordinator.CheckCreate, CheckAlter: ISR-only keys on
// raft topics, min.insync.replicas above the replication factor, a mode
// change) before they propose, validateOnly too. Every node applies a topic's configs to its open
// replicas whenever the metadata changes (reconcile.go,
// applyTopicConfigs), so an altered retention, segment size,
// max.message.bytes, compression.type or message.timestamp.type takes
// effect without a restart.
//
// Offline replicas: a replica the metadata places here that the node
// cannot open (a damaged log, a full disk) is retried by the reconcile
// loop; meanwhile Metadata from this node reports it offline and never
// names this node its leader, /v1/status lists it under offline_replicas
// with the error, cluster status prints it, and raftq_offline_replicas
// counts it.
//
// Brokers: the metadata leader marks a broker dead when it has not heard
// from it for three election timeouts. Metadata and DescribeCluster then
// leave it out, as Kafka lists only live brokers; its replicas still show
// in the partitions, under offline replicas, and DescribeCluster v2 names
// it as fenced when the client asks (IncludeFencedBrokers).
//
// # Membership
//
// A node joins a running cluster through Config.Seeds (join.go, which
// spells out the order): seeds are peer addresses, and a seed answers
// on the peer transport's join stream, the one stream open to a node
// that is not a peer. The joiner probes a seed (cluster id, peers, and
// a refusal of an id registered from another data dir), writes
// node.json marked joining, opens group 0 empty, and has a seed commit
// coordinator.AdmitNode with its advertised peer address; then it
// registers as any node does. node.json marked joining at a start means
// the admission may not have happened: the node asks again, with the
// same incarnation. Unmarked, the node restarts without its seeds.
//
// Peers (peers.go): on every metadata change the node adds to its
// transport every node whose peer address the metadata holds (admitted
// or registered) and the transport lacks or holds under another
// address; it removes none. A node registers the peer address it
// advertises (Config.AdvertisedPeerAddr, else the bound one); wildcard
// addresses are never added. Every node's transport thus knows a joined
// node once its admission applies there, which is before the metadata
// leader adds it to group 0 (coordinator.ControllerConfig.HasPeer).
//
// # Goroutines
//
// The control plane's loops (register, reconcile, leader-hints,
// metadata-leader, leader-balance) are coordinator.Controller's; it calls
// the node's reconcile (reconcile.go) and sees its replicas as
// coordinator.LocalReplica (loops.go). Close stops the controller first,
// then the node's own goroutines, which Close waits for (goTracked): the
// retention, groups and peers loops, a coordinator's activation and ticks
// (group and transaction coordinators alike), and,
// retention, groups, cleaner and maintenance loops (the last hands over
// leaderships on its own goroutine, its transfers as a drain's), a
// coordinator's activation and ticks, and,
// per new partition whose preferred leader is this node, stand-first. Work a request or a loop starts on its own goroutine (a produce's
// waits, a fetch's long poll, a coordinator's activation) ends with the
// request's context or when the raft host stops, which fails every
// pending proposal with ErrStopped; raftReplication.track's goroutines end
// with their proposal.
// Drain (drain.go), which raftq server runs on SIGTERM before Close,
// runs on its caller's goroutine and starts one goroutine per leadership
// transfer, at most drainConcurrency at once, each ended before it
// returns.
//
// # Process-wide state
//
// etcd keeps the WAL segment size in a package variable that open WALs
// read on every save, so the first Node of a process sets it
// (Config.WALSegmentBytes) and later ones (raftq dev, in-process tests)
// keep it (walsize.go).
//
// # Lock order
//
// The lock order is DESIGN.md's ("Lock order"): produceMu -> projMu ->
// raftgroup; produceMu -> isr.Partition's lock -> partition.Log.writeMu;
// producerIDs.mu is held across a metadata proposal; Node.mu and
// isrSide.mu are leaves. produceMu also guards a partition's txnGuards
// and is never held across a verification (txnVerify).
//
// Close stops the ISR side after the replicas: every isr.Partition is
// closed (closeReplicas), then the manager, then the AlterPartition
// proposals still under way are waited for (they end with the node's
// context).
package broker
