package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/transport/kafka"
	"github.com/raftq/raftq/transport/peer"
)

// Node is one raftq broker: the raft host with its metadata group and
// partition groups, the peer transport, the Kafka listener and the admin
// HTTP server.
type Node struct {
	cfg    Config
	log    *slog.Logger
	advert string // advertised Kafka address
	// incarnation names this data dir (node.json); peers check it.
	incarnation string

	peer *peer.Transport
	host *raftgroup.Host
	meta *coordinator.Metadata
	ctl  *coordinator.Controller // group 0 and the control plane's loops

	kafka   *kafka.Server
	extra   []*kafka.Server // Config.Listeners, in order (listeners.go)
	ssl     *sslListeners   // TLS of the SSL and SASL_SSL listeners; nil without one (listeners_tls.go)
	admin   *http.Server
	adminLn net.Listener
	metrics *metrics
	cleaner *cleaner // cleaner.go
	apis    []kafka.APIRange
	acls    derived[[]auth.ACL, *auth.ACLIndex]                // the index the authorizer decides by (authorize.go)
	shapes  derived[map[string]*coordinator.ScramUser, shapes] // the SASL decoys' shapes (scram_shapes.go)

	mu       sync.Mutex // guards replicas, offline and closed
	replicas map[uint64]*replica
	offline  map[uint64]OfflineReplica // replicas placed here that failed to open, by raft group
	closed   bool

	pids producerIDs
	// txnVerify, when set, verifies with the transaction coordinator
	// that a partition is in a producer's transaction (KIP-890's
	// AddPartitionsToTxn VerifyOnly) before the partition's leader
	// appends the transaction's first batch there (produce_txn.go). It
	// returns 0, or the Kafka error code that refuses the batch. nil
	// verifies nothing. Set it before transactional produces arrive.
	txnVerify func(ctx context.Context, transactionalID string, producerID int64, epoch int16, topic string, partition int32) int16
	isr       isrSide // the ISR mode's manager, made at first need (isr_node.go)

	brokerCl brokerClients // Kafka clients of other brokers (txn_client.go)
	tls      nodeTLS       // peer and admin TLS (node_tls.go)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New creates a node from cfg and starts it: it listens on its three
// addresses, joins the metadata group and begins to host the partitions
// the metadata places on it. It returns once it is listening; the cluster
// may still be electing leaders.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	advert, _ := cfg.advertisedKafka()
	n := &Node{
		cfg: cfg, advert: advert,
		log:      logging.Discard(cfg.Logger).With("node", cfg.NodeID),
		meta:     coordinator.NewMetadata(),
		replicas: map[uint64]*replica{},
		offline:  map[uint64]OfflineReplica{},
		metrics:  newMetrics(),
		cleaner:  newCleaner(cfg.LogCleanerIOBytesPerSec),
	}
	n.metrics.registerCleaner(n.cleaner)
	n.txnVerify = n.askTxnCoordinator // KIP-890: transactional produce asks the coordinator (txn_verify.go)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.start(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start() error {
	if err := n.startSSL(); err != nil { // listeners_tls.go: first, so a bad certificate changes nothing
		return err
	}
	if err := n.loadTLS(); err != nil { // node_tls.go
		return err
	}
	plan, err := n.planJoin() // join.go: nil unless --seeds and not yet a member
	if err != nil {
		return err
	}
	inc, err := claimDataDir(n.cfg.DataDir, n.cfg.ClusterID, n.cfg.NodeID)
	if err != nil {
		return err
	}
	n.incarnation = inc
	setWALSegmentSize(n.cfg.WALSegmentBytes, n.log)
	if err := n.startRaft(plan); err != nil {
		return err
	}
	if err := n.startController(); err != nil {
		return err
	}
	n.goLoop("peers", n.peersLoop) // peers.go
	if err := n.finishJoin(plan); err != nil {
		return err
	}
	if err := n.startKafka(); err != nil {
		return err
	}
	if err := n.startListeners(); err != nil {
		return err
	}
	if err := n.startAdmin(); err != nil {
		return err
	}
	_, _, adminAddr := n.Addrs()
	n.ctl.Start(coordinator.Broker{ID: n.cfg.NodeID, KafkaAddr: n.advert, PeerAddr: n.peerAdvert(), AdminAddr: adminAddr, Incarnation: n.incarnation,
		StartID: coordinator.NewStartID(), ControlledShutdown: true, SetMaintenance: true, ElectUnclean: true, ResignLostData: true, RestartForgetsLeader: true, ACLs: true, Scram: true,
		Listeners: n.advertisedListeners()})
	n.goLoop("retention", n.retentionLoop)
	n.goLoop("groups", n.groupsLoop)
	n.goLoop("cleaner", n.cleanerLoop)
	n.goLoop("maintenance", n.maintenanceLoop)
	n.log.Info("node started", "kafka", n.kafka.Addr(), "peer", n.peer.Addr(), "admin", n.adminLn.Addr(),
		"cluster", n.cfg.ClusterID, "fsync", n.cfg.Fsync)
	return nil
}

func (n *Node) startRaft(plan *joinPlan) error {
	pc := peer.DefaultConfig()
	pc.ClusterID, pc.NodeID, pc.ListenAddr = n.cfg.ClusterID, n.cfg.NodeID, n.cfg.PeerAddr
	pc.Incarnation, pc.CheckIncarnation = n.incarnation, n.checkIncarnation
	pc.Peers = map[uint64]string{}
	for id, addr := range n.cfg.InitialCluster {
		if id != n.cfg.NodeID {
			pc.Peers[id] = addr
		}
	}
	if plan != nil {
		maps.Copy(pc.Peers, plan.peers) // a joining node's, from its seed
	}
	pc.JoinHandler = n.serveJoin // join.go
	// The transport and the raft host add the node id themselves.
	pc.Logger = logging.Discard(n.cfg.Logger).With("component", "peer")
	pc.Dial = peerDialer(n.cfg.PeerAddr)
	pc.FetchHandler = n.serveReplicaFetch    // ISR followers' fetches
	pc.ServerTLS, pc.ClientTLS = n.peerTLS() // node_tls.go
	pc.CheckPeerCertificate = n.peerCertificateCheck()
	t, err := peer.New(pc)
	if err != nil {
		return fmt.Errorf("peer transport: %w", err)
	}
	n.peer = t
	hc := raftgroup.DefaultConfig()
	hc.NodeID, hc.DataDir, hc.Transport = n.cfg.NodeID, n.cfg.DataDir, t
	hc.TickInterval, hc.ElectionTicks, hc.HeartbeatTicks = n.cfg.TickInterval, n.cfg.ElectionTicks, n.cfg.HeartbeatTicks
	hc.SnapshotEntries, hc.Fsync, hc.SharedWAL = n.cfg.SnapshotEntries, n.cfg.Fsync, n.cfg.SharedWAL
	hc.AsyncStorageWrites = n.cfg.AsyncStorageWrites
	hc.LearnerSnapshotBytesPerSec = n.cfg.ReassignmentBytesPerSec
	hc.SnapshotCatchUpEntries = min(hc.SnapshotCatchUpEntries, n.cfg.SnapshotEntries)
	hc.Logger = logging.Discard(n.cfg.Logger).With("component", "raft")
	hc.ObserveSync = func(d time.Duration) { n.metrics.walSync.Observe(d.Seconds()) }
	h, err := raftgroup.NewHost(hc)
	if err != nil {
		return fmt.Errorf("raft host: %w", err)
	}
	n.host = h
	if err := t.Start(h); err != nil {
		return fmt.Errorf("peer transport: %w", err)
	}
	return nil
}

// startController opens group 0 (coordinator.NewController); its loops
// start once the node listens.
func (n *Node) startController() error {
	defaults, err := coordinator.ResolveTopicDefaults(n.cfg.BrokerConfigs)
	if err != nil {
		return fmt.Errorf("broker configs: %w", err)
	}
	c, err := coordinator.NewController(coordinator.ControllerConfig{
		NodeID: n.cfg.NodeID, Host: n.host, Metadata: n.meta, Nodes: n.cfg.nodeIDs(), EligibleLeaderReplicas: n.cfg.EligibleLeaderReplicas,
		MetadataVoters: n.cfg.MetadataVoters, VoterReplaceAfter: n.cfg.VoterReplaceAfter, HasPeer: n.hasPeer, // join.go, peers.go
		TopicDefaults:         defaults,
		DeadAfter:             3 * time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval,
		LeaderBalanceInterval: n.cfg.LeaderBalanceInterval,
		PartitionBalancer:     n.cfg.PartitionBalancer,
		Connected:             func(id uint64) bool { s, _ := n.peer.PeerStats(id); return s.Connected },
		LastHeard:             func(id uint64) time.Time { s, _ := n.peer.PeerStats(id); return s.LastHeard },
		Local:                 n.localReplicas,
		Reconcile:             n.reconcile,
		ReconcileInterval:     5 * time.Second,
		Logger:                n.log.With("component", "controller"),
	})
	if err != nil {
		return err
	}
	n.ctl = c
	return nil
}

func (n *Node) startKafka() error {
	s, err := kafka.Start(n.kafkaConfig(n.cfg.KafkaListenerName, n.cfg.KafkaAddr), n.handler())
	if err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	n.kafka = s
	return nil
}

// peerDialer dials peers from the IP of our own peer address, so that
// a network partition keyed on node addresses (chaos/) cuts our traffic
// too; with a wildcard peer address the kernel picks.
func peerDialer(peerAddr string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	if host, _, err := net.SplitHostPort(peerAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return d.DialContext
}

// goLoop runs fn until Close, logging how it ended.
func (n *Node) goLoop(name string, fn func(ctx context.Context)) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn(n.ctx)
		n.log.Debug("loop stopped", "loop", name)
	}()
}

// goTracked runs fn on its own goroutine, which Close waits for. Only a
// goroutine that ends before Close's Wait begins may call it (the node's
// loops and what goTracked started, or the controller's loops, which
// Close stops first), so that no Add races with that Wait.
func (n *Node) goTracked(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// Close stops the node: listeners first, then the loops, the partition
// replicas and the raft host.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	var errs []error
	if n.kafka != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, n.kafka.Shutdown(ctx))
		cancel()
	}
	errs = append(errs, n.shutdownListeners()...)
	if n.admin != nil {
		errs = append(errs, n.admin.Close())
	}
	if n.ctl != nil {
		n.ctl.Close() // first: its reconcile opens replicas, which may goTracked
	}
	n.wg.Wait()
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.peer != nil {
		errs = append(errs, n.peer.Close())
	}
	errs = append(errs, n.closeReplicas())
	n.closeISR() // after its partitions (closeReplicas)
	return errors.Join(errs...)
}

// Addrs reports the bound addresses (useful with port 0).
func (n *Node) Addrs() (kafkaAddr, peerAddr, adminAddr string) {
	return n.kafka.Addr().String(), n.peer.Addr().String(), n.adminLn.Addr().String()
}

// ID returns the node id.
func (n *Node) ID() uint64 { return n.cfg.NodeID }

// Metadata returns the current cluster metadata.
func (n *Node) Metadata() *coordinator.State { return n.meta.View() }

func (n *Node) logDir(topic string, index int32) string {
	return filepath.Join(n.cfg.DataDir, "log", fmt.Sprintf("%s-%d", topic, index))
}
