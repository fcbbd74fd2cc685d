package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/raftq/raftq/chaos/lazyfs"
	"github.com/raftq/raftq/chaos/netns"
	"github.com/raftq/raftq/internal/logging"
)

var (
	// ErrNoNamespace is returned for a partition on a cluster that runs
	// on the host network.
	ErrNoNamespace = errors.New("chaos: partitions need a cluster in a network namespace")
	// ErrNoLazyFS is returned by LoseUnsynced on a cluster without lazyfs.
	ErrNoLazyFS = errors.New("chaos: losing unsynced writes needs lazyfs data dirs")
	// ErrNoLeaderFunc is returned when a leader is asked for and the
	// Config has no Leader func.
	ErrNoLeaderFunc = errors.New("chaos: no Leader func configured")
	// ErrNoRolesFunc is returned when a script names a role and the
	// Config has no Roles func.
	ErrNoRolesFunc = errors.New("chaos: no Roles func configured")
	// ErrUnknownNode is returned for a node id outside 1..Nodes.
	ErrUnknownNode = errors.New("chaos: unknown node")
	// ErrClosed is returned by operations on a closed Cluster.
	ErrClosed = errors.New("chaos: cluster closed")
)

// Ports are the ports a node listens on.
type Ports struct {
	Kafka, Peer, Admin int
}

// DefaultPorts are raftq's standard ports. Inside a namespace every node
// has its own address, so every node uses them.
var DefaultPorts = Ports{Kafka: 9092, Peer: 9093, Admin: 9644}

// Node is one node's identity, addresses and files.
type Node struct {
	ID      int        // 1-based, also the raft node id
	Host    netip.Addr // 127.0.0.<ID+1>; 127.0.0.1 is the harness's
	Ports   Ports
	Dir     string // <Config.Dir>/node-<ID>
	DataDir string // <Dir>/data, the lazyfs mount when Config.LazyFS
	LogPath string // <Config.Dir>/node-<ID>.log, stdout and stderr of every run
}

// KafkaAddr is the node's Kafka listener, "host:port".
func (n Node) KafkaAddr() string { return netip.AddrPortFrom(n.Host, uint16(n.Ports.Kafka)).String() }

// PeerAddr is the node's raft peer listener.
func (n Node) PeerAddr() string { return netip.AddrPortFrom(n.Host, uint16(n.Ports.Peer)).String() }

// AdminAddr is the node's admin HTTP listener.
func (n Node) AdminAddr() string { return netip.AddrPortFrom(n.Host, uint16(n.Ports.Admin)).String() }

// ArgsFunc builds one node's command line (without the binary); all is
// every node of the cluster, for flags such as --initial-cluster.
type ArgsFunc func(n Node, all []Node) []string

// ReadyFunc returns nil once node n serves.
type ReadyFunc func(ctx context.Context, c *Cluster, n Node) error

// LeaderFunc returns the id of the node now leading whatever the caller
// chose to watch (for raftq: one partition, asked over /v1/status).
type LeaderFunc func(ctx context.Context, c *Cluster) (int, error)

// RolesFunc names the nodes of each role of one partition, for scripts
// (see Script and Env.Roles).
type RolesFunc func(ctx context.Context, c *Cluster, partition string) (RoleMap, error)

// Config describes a cluster of real processes.
type Config struct {
	Binary string   // executable to run for every node
	Nodes  int      // number of nodes, 1..250
	Dir    string   // root of node dirs and logs; must exist or be creatable
	Args   ArgsFunc // per-node argument template
	Env    []string // extra environment for every node

	// Namespace runs the nodes in a private network namespace, which
	// partitions need. Off, nodes bind 127.0.0.<ID+1> on the host with
	// ports picked free at New.
	Namespace bool
	// LazyFS puts every node's DataDir on a lazyfs mount, which
	// LoseUnsynced needs.
	LazyFS bool
	// LazyFSSyncBacking makes lazyfs fsync the backing file on every
	// client fsync, so an fsync costs what it costs on the real disk.
	// Off, fsync through lazyfs is ~15x cheaper than on the disk
	// (BenchmarkAppendFsync): fine for correctness runs, misleading for
	// throughput comparisons with runs off lazyfs.
	LazyFSSyncBacking bool
	// LazyFSWritebackAge turns on lazyfs's writeback model: files dirty
	// for at least this long are written back and survive a power loss,
	// as on Linux (30 s). Zero is the worst case: a power loss drops every
	// write not fsynced.
	LazyFSWritebackAge time.Duration
	// Ports are the ports inside a namespace (DefaultPorts when zero).
	Ports Ports
	// GuardPeerPort rejects connections from 127.0.0.1 to the nodes' peer
	// ports (see netns.Namespace.Guard): nodes must dial peers from
	// their own address, or partitions would not cut them.
	GuardPeerPort bool

	Ready        ReadyFunc  // nil: a started process is ready
	Leader       LeaderFunc // for kill-leader and isolate-leader
	Roles        RolesFunc  // for scripts that name roles
	StartTimeout time.Duration
	// StopTimeout is the SIGTERM grace before SIGKILL in Stop; the
	// default, 20 s, outlasts raftq server's leadership drain
	// (--shutdown-timeout, 10 s) and its close.
	StopTimeout time.Duration
	// AdminTLS, when set, is the client config of HTTPClient for nodes
	// whose admin listeners serve HTTPS (admin_tls.go).
	AdminTLS *tls.Config
	Logger   *slog.Logger
}

// DefaultConfig returns a Config with the timeouts set; Binary, Nodes,
// Dir and Args must still be filled in.
func DefaultConfig() Config {
	return Config{StartTimeout: 30 * time.Second, StopTimeout: 20 * time.Second, Ports: DefaultPorts}
}

// Validate checks the Config.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("chaos: config needs a binary")
	case c.Nodes < 1 || c.Nodes > 250:
		return fmt.Errorf("chaos: %d nodes; want 1..250", c.Nodes)
	case c.Dir == "":
		return errors.New("chaos: config needs a dir")
	case c.Args == nil:
		return errors.New("chaos: config needs an Args func")
	case c.StartTimeout <= 0 || c.StopTimeout <= 0:
		return errors.New("chaos: start and stop timeouts must be positive")
	case c.LazyFSWritebackAge < 0:
		return errors.New("chaos: lazyfs writeback age must not be negative")
	}
	return nil
}

// Cluster runs and faults N node processes. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	nodes []Node
	ns    *netns.Namespace   // nil on the host network
	fs    map[int]*lazyfs.FS // by node id, when LazyFS
	spawn *spawner
	http  *http.Client

	mu      sync.Mutex // guards procs, crashes, closed
	procs   map[int]*proc
	crashes []Exit
	closed  bool
}

// New prepares the cluster (namespace, node dirs, lazyfs mounts) without
// starting any node. Close it when done, also on failure paths: in tests,
// t.Cleanup(func() { c.Close() }).
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Ports == (Ports{}) {
		cfg.Ports = DefaultPorts
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: logging.Discard(cfg.Logger), fs: map[int]*lazyfs.FS{}, procs: map[int]*proc{}}
	c.spawn = newSpawner()
	if err := c.setup(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.http = c.newHTTPClient() // admin_tls.go
	return c, nil
}

func (c *Cluster) setup(ctx context.Context) error {
	if c.cfg.Namespace {
		ns, err := netns.New(ctx, c.log)
		if err != nil {
			return err
		}
		c.ns = ns
	}
	nodes, err := c.plan()
	if err != nil {
		return err
	}
	c.nodes = nodes
	for _, n := range nodes {
		if err := c.prepareDirs(n); err != nil {
			return err
		}
	}
	return c.guard(ctx)
}

// plan assigns addresses and paths.
func (c *Cluster) plan() ([]Node, error) {
	nodes := make([]Node, c.cfg.Nodes)
	for i := range nodes {
		id := i + 1
		n := Node{ID: id, Host: hostOf(id), Ports: c.cfg.Ports}
		n.Dir = filepath.Join(c.cfg.Dir, fmt.Sprintf("node-%d", id))
		n.DataDir = filepath.Join(n.Dir, "data")
		n.LogPath = filepath.Join(c.cfg.Dir, fmt.Sprintf("node-%d.log", id))
		if c.ns == nil {
			p, err := freePorts(n.Host)
			if err != nil {
				return nil, err
			}
			n.Ports = p
		}
		nodes[i] = n
	}
	return nodes, nil
}

// hostOf is node id's address: 127.0.0.<id+1>.
func hostOf(id int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(id + 1)}) }

// freePorts picks three ports free on host now (the usual race applies:
// something else may take them before the node binds).
func freePorts(host netip.Addr) (Ports, error) {
	var ports [3]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", netip.AddrPortFrom(host, 0).String())
		if err != nil {
			return Ports{}, fmt.Errorf("chaos: pick a port on %s: %w", host, err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return Ports{Kafka: ports[0], Peer: ports[1], Admin: ports[2]}, nil
}

func (c *Cluster) prepareDirs(n Node) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("chaos: node dir %s: %w", n.Dir, err)
	}
	if !c.cfg.LazyFS {
		return os.MkdirAll(n.DataDir, 0o755)
	}
	lc := lazyfs.DefaultConfig()
	lc.Backing, lc.Mountpoint = filepath.Join(n.Dir, "durable"), n.DataDir
	lc.SyncBacking, lc.Logger = c.cfg.LazyFSSyncBacking, c.log
	lc.WritebackAge = c.cfg.LazyFSWritebackAge
	fsys, err := lazyfs.Mount(lc)
	if err != nil {
		return err
	}
	c.fs[n.ID] = fsys
	return nil
}

func (c *Cluster) guard(ctx context.Context) error {
	if c.ns == nil || !c.cfg.GuardPeerPort {
		return nil
	}
	var dsts []netip.AddrPort
	for _, n := range c.nodes {
		dsts = append(dsts, netip.AddrPortFrom(n.Host, uint16(n.Ports.Peer)))
	}
	return c.ns.Guard(ctx, dsts)
}

// Nodes returns every node, in id order.
func (c *Cluster) Nodes() []Node { return slices.Clone(c.nodes) }

// NodeIDs returns 1..N.
func (c *Cluster) NodeIDs() []int {
	ids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.ID
	}
	return ids
}

// Node returns node id.
func (c *Cluster) Node(id int) (Node, error) {
	if id < 1 || id > len(c.nodes) {
		return Node{}, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	return c.nodes[id-1], nil
}

// Namespace returns the cluster's network namespace, or nil.
func (c *Cluster) Namespace() *netns.Namespace { return c.ns }

// FS returns node id's lazyfs, or nil.
func (c *Cluster) FS(id int) *lazyfs.FS { return c.fs[id] }

// DialContext reaches an address where the nodes live (inside the
// namespace, from 127.0.0.1, or on the host). Give it to Kafka clients
// (kgo.Dialer) and HTTP transports. Only 127.0.0.0/8 is allowed.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.ns != nil {
		return c.ns.DialContext(ctx, network, addr)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("%w: %q", netns.ErrOutsideLoopback, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// HTTPClient returns a client whose connections go through DialContext,
// under Config.AdminTLS when set.
func (c *Cluster) HTTPClient() *http.Client { return c.http }

// Partition applies grudge g (replacing any partition in force).
func (c *Cluster) Partition(ctx context.Context, g Grudge) error {
	if c.ns == nil {
		return ErrNoNamespace
	}
	for to, froms := range g {
		for _, id := range append([]int{to}, froms...) {
			if _, err := c.Node(id); err != nil {
				return err
			}
		}
	}
	c.log.Info("partition", "grudge", g.String())
	return c.ns.Drop(ctx, g.Rules(hostOf))
}

// Heal removes every partition.
func (c *Cluster) Heal(ctx context.Context) error {
	if c.ns == nil {
		return nil
	}
	c.log.Info("heal partitions")
	return c.ns.Heal(ctx)
}

// Leader asks the configured LeaderFunc.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	if c.cfg.Leader == nil {
		return 0, ErrNoLeaderFunc
	}
	id, err := c.cfg.Leader(ctx, c)
	if err != nil {
		return 0, err
	}
	if _, err := c.Node(id); err != nil {
		return 0, err
	}
	return id, nil
}

// Roles asks the configured RolesFunc and checks every node it names.
func (c *Cluster) Roles(ctx context.Context, partition string) (RoleMap, error) {
	if c.cfg.Roles == nil {
		return RoleMap{}, ErrNoRolesFunc
	}
	r, err := c.cfg.Roles(ctx, c, partition)
	if err != nil {
		return RoleMap{}, err
	}
	for _, nodes := range r.Nodes {
		for _, id := range nodes {
			if _, err := c.Node(id); err != nil {
				return RoleMap{}, err
			}
		}
	}
	return r, nil
}

// KillLeader kills -9 the current leader and returns its id.
func (c *Cluster) KillLeader(ctx context.Context) (int, error) {
	id, err := c.Leader(ctx)
	if err != nil {
		return 0, err
	}
	return id, c.Kill(ctx, id)
}

// Close kills every node, unmounts every lazyfs, deletes the namespace
// and stops the spawner thread. It is safe to call more than once and on
// a half-built cluster.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	procs := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		p.kill()
		<-p.done
	}
	for _, fsys := range c.fs {
		errs = append(errs, fsys.Unmount())
	}
	if c.ns != nil {
		errs = append(errs, c.ns.Close())
	}
	c.spawn.stop()
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	return errors.Join(errs...)
}
