package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftq/raftq/broker"
)

// runDev starts three nodes in this process on loopback: Kafka on
// consecutive ports from --base-port, peers 100 above, admin from 9644.
func runDev(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "dev", "")
	dataDir := fs.String("data-dir", "", "keep data here (default: a temp dir removed on exit)")
	nodes := fs.Int("nodes", 3, "number of nodes (odd)")
	base := fs.Int("base-port", 9092, "Kafka port of node 1; node i listens on base+i-1, and its peers 100 above")
	adminBase := fs.Int("admin-port", 9644, "admin HTTP port of node 1")
	fsync := fs.String("fsync", "always", "WAL fsync policy: always or never")
	walMode := fs.String("wal", walMode(broker.DefaultConfig().SharedWAL), walUsage)
	async := fs.Bool("async-writes", broker.DefaultConfig().AsyncStorageWrites, asyncUsage)
	autoCreate := fs.Bool("auto-create-topics", true, "create unknown topics on first use")
	logLevel := fs.String("log-level", "warn", "node log level")
	cons := bindConsoleFlags(fs)
	withTLS := fs.Bool("tls", false, "also serve an SSL and a SASL_SSL listener on every node, from a throwaway CA and certificates made under the data dir (reused when there), with SCRAM user dev (password dev-secret); prints how to connect")
	tlsBase := fs.Int("tls-port", 0, "SSL port of node 1 with --tls (default: --base-port + 200); its SASL_SSL port is 50 above")
	repl := broker.DefaultConfig()
	bindReplicationFlags(fs, &repl)
	brokerConfigs := bindBrokerConfigFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	bc, err := brokerConfigs.configs()
	if err != nil {
		return err
	}
	repl.BrokerConfigs = bc
	if *nodes < 1 || *nodes%2 == 0 {
		return usageError{fmt.Errorf("--nodes %d: want an odd number", *nodes)}
	}
	level, err := parseLevel(*logLevel)
	if err != nil {
		return err
	}
	if err := checkDevNodes(*dataDir, *nodes); err != nil {
		return err
	}
	dir, cleanup, err := devDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer cleanup()
	if *dataDir == "" {
		defer removeOnForcedQuit(ctx, e, dir)()
	}
	var dtls *devTLS
	if *withTLS {
		if dtls, err = newDevTLS(dir, *base, *tlsBase); err != nil {
			return err
		}
	}
	started, stop, err := startDevNodes(e, dir, *nodes, *base, *adminBase, devStorage{*fsync, *walMode, *async, repl}, *autoCreate, level, cons, dtls)
	defer stop()
	if err != nil {
		return err
	}
	if dtls != nil {
		if err := dtls.bootstrapUser(ctx, devAddrs(started, ""), devAddrs(started, devSASLSSLListener)); err != nil {
			return err
		}
	}
	printDevBanner(e, started, dir, *dataDir == "", *autoCreate, dtls)
	<-ctx.Done()
	fmt.Fprintln(e.stderr, "\nstopping raftq dev cluster")
	return nil
}

func devDataDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", "raftq-dev-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// removeOnForcedQuit keeps a second Ctrl-C, which quits at once while
// the nodes are still stopping, from leaving the temporary data dir
// behind: once ctx ends it takes the next interrupt itself, removes dir
// and exits 130. The returned func stops the watch.
func removeOnForcedQuit(ctx context.Context, e *env, dir string) (stop func()) {
	done := make(chan struct{})
	sig := make(chan os.Signal, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		signal.Notify(sig, os.Interrupt)
		select {
		case <-sig:
		case <-done:
			return
		}
		fmt.Fprintf(e.stderr, "quitting at once; removing %s\n", dir)
		for range 3 { // nodes still writing may add files as it goes
			if os.RemoveAll(dir) == nil {
				break
			}
		}
		os.Exit(130)
	}()
	return func() {
		close(done)
		signal.Stop(sig)
	}
}

// devStorage is the storage and replication flags every dev node
// shares.
type devStorage struct {
	fsync, wal string
	async      bool
	// repl carries the replication flags (bindReplicationFlags) and the
	// broker configs (bindBrokerConfigFlags).
	repl broker.Config
}

// startDevNodes starts the nodes; stop closes those it started, even
// when it fails.
func startDevNodes(e *env, dir string, count, base, adminBase int, st devStorage, autoCreate bool, level slog.Level, cons *consoleFlags, dtls *devTLS) (nodes []*broker.Node, stop func(), err error) {
	cluster := map[uint64]string{}
	for i := 1; i <= count; i++ {
		cluster[uint64(i)] = fmt.Sprintf("127.0.0.1:%d", base+100+i-1)
	}
	var closers []func() error
	stop = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	for i := 1; i <= count; i++ {
		f := &serverFlags{cfg: broker.DefaultConfig(), cluster: broker.FormatCluster(cluster), fsync: st.fsync, wal: st.wal}
		c := &f.cfg
		c.NodeID, c.ClusterID = uint64(i), "raftq-dev"
		c.DataDir = filepath.Join(dir, fmt.Sprintf("node%d", i))
		c.KafkaAddr = fmt.Sprintf("127.0.0.1:%d", base+i-1)
		c.PeerAddr = cluster[uint64(i)]
		c.AdminAddr = fmt.Sprintf("127.0.0.1:%d", adminBase+i-1)
		c.AutoCreateTopics = autoCreate
		c.AsyncStorageWrites = st.async
		c.ReplicaLagTimeMax, c.ReplicaFetchWaitMax = st.repl.ReplicaLagTimeMax, st.repl.ReplicaFetchWaitMax
		c.EligibleLeaderReplicas = st.repl.EligibleLeaderReplicas
		c.BrokerConfigs = st.repl.BrokerConfigs
		c.LogCleanerBackoff, c.LogCleanerIOBytesPerSec = st.repl.LogCleanerBackoff, st.repl.LogCleanerIOBytesPerSec
		c.DefaultReplicationFactor = int16(min(3, count))
		dtls.configure(c, i) // dev_tls.go
		logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
		cfg, err := f.config(logger)
		if err != nil {
			return nodes, stop, err
		}
		cfg.Console = cons.hook(logger)
		n, closeNode, err := openNode(cfg)
		if err != nil {
			return nodes, stop, fmt.Errorf("node %d: %w", i, devPortTaken(err, cfg, base))
		}
		nodes, closers = append(nodes, n), append(closers, closeNode)
	}
	return nodes, stop, waitClusterReady(nodes, 30*time.Second)
}

// devPortTaken names the flag that moves a port found in use, where the
// listener's own error names only the port: dev derives every port from
// --base-port and --admin-port, and a peer port from neither by name.
func devPortTaken(err error, c broker.Config, base int) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) || op.Addr == nil {
		return err
	}
	switch op.Addr.String() {
	case c.PeerAddr:
		return fmt.Errorf("the peer port %s is in use: dev's peers listen 100 above the Kafka ports (--base-port %d: peers from %d); pick another --base-port", c.PeerAddr, base, base+100)
	case c.KafkaAddr:
		return fmt.Errorf("the Kafka port %s is in use; pick another --base-port", c.KafkaAddr)
	case c.AdminAddr:
		return fmt.Errorf("the admin port %s is in use; pick another --admin-port", c.AdminAddr)
	}
	return err
}

// waitClusterReady waits until every node sees every broker registered.
func waitClusterReady(nodes []*broker.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ready := true
		for _, n := range nodes {
			if len(n.Metadata().Brokers) < len(nodes) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("cluster not ready after %s", timeout)
}

func printDevBanner(e *env, nodes []*broker.Node, dir string, temp, autoCreate bool, dtls *devTLS) {
	b := devBanner{dir: dir, temp: temp, autoCreate: autoCreate, self: selfCommand(os.Args[0]), tls: dtls}
	for _, n := range nodes {
		k, _, a := n.Addrs()
		b.kafka = append(b.kafka, k)
		b.admin = append(b.admin, a)
		if dtls != nil {
			b.tlsKafka = append(b.tlsKafka, n.ListenerAddr(devTLSListener))
			b.saslSSLKafka = append(b.saslSSLKafka, n.ListenerAddr(devSASLSSLListener))
		}
	}
	fmt.Fprint(e.stdout, b.String())
}

// devBanner is what raftq dev prints once its cluster is up.
type devBanner struct {
	kafka, admin []string // each node's Kafka and admin address
	dir          string
	temp         bool // dir is removed on exit
	autoCreate   bool // --auto-create-topics
	self         string
	tls          *devTLS  // --tls; nil without
	tlsKafka     []string // each node's SSL listener address with --tls
	saslSSLKafka []string // and its SASL_SSL one
}

func (b devBanner) String() string {
	bootstrap := strings.Join(b.kafka, ",")
	where := b.dir
	if b.temp {
		where += " (removed on exit)"
	}
	var urls []string
	for _, a := range b.admin {
		urls = append(urls, "http://"+a+"/")
	}
	try := "Try it (topics are created on first use):"
	if !b.autoCreate {
		try = "Try it (create topics first: --auto-create-topics=false):"
	}
	return fmt.Sprintf(`raftq dev cluster: %d nodes, data in %s

  bootstrap servers   %s
  admin               %s
  web console         %[11]s (any node's admin address)

%[5]s
  %[6]s topic create demo --partitions 3 --brokers %[3]s
  echo hello | %[6]s produce demo --brokers %[3]s
  %[6]s consume demo --brokers %[3]s
  kcat -b %[7]s -t demo -C -e
  %[6]s cluster status --admin %[8]s

franz-go: kgo.NewClient(kgo.SeedBrokers(%[7]q))

For the raftq commands without --brokers and --admin (flags still win):
  export %[9]s=%[3]s %[10]s=%[8]s
%[12]s
Ctrl-C stops the cluster.
`, len(b.kafka), where, bootstrap, strings.Join(urls, " "), try, b.self, b.kafka[0], b.admin[0], envBrokers, envAdmin, urls[0], b.tlsBanner())
}

// selfCommand is how the banner tells the user to run raftq again: "go
// run ./cmd/raftq" when go run built this binary (into a temporary
// go-build directory), else the path it was started as.
func selfCommand(arg0 string) string {
	if strings.Contains(arg0, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/raftq"
	}
	return arg0
}
