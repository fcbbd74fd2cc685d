package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/raftq/raftq/internal/logging"
)

// Prefix starts the name of every namespace this package creates,
// followed by the creating process id: "raftq-<pid>-<random>".
const Prefix = "raftq-"

var (
	// ErrUnavailable means a tool or privilege the namespace needs is missing.
	ErrUnavailable = errors.New("netns: unavailable")
	// ErrClosed is returned by operations on a closed Namespace.
	ErrClosed = errors.New("netns: closed")
	// ErrOutsideLoopback is returned for an address outside 127.0.0.0/8:
	// nothing here may send traffic anywhere else.
	ErrOutsideLoopback = errors.New("netns: address outside 127.0.0.0/8")
)

// HarnessAddr is the address the test harness and its clients use inside
// the namespace (the kernel's default source on lo).
var HarnessAddr = netip.MustParseAddr("127.0.0.1")

const (
	dropChain  = "RAFTQ"
	guardChain = "RAFTQ-GUARD"
)

// Namespace is a private network namespace with lo up, in which every
// address of 127.0.0.0/8 is local. Its methods are safe for concurrent use.
type Namespace struct {
	name     string
	fd       int // /run/netns/<name>, for setns
	iptables string
	log      *slog.Logger

	mu     sync.Mutex // serializes rule changes and Close
	rules  []Rule
	closed bool
}

// New creates a namespace, brings lo up and installs the (empty) drop and
// guard chains. The caller must Close it.
func New(ctx context.Context, log *slog.Logger) (*Namespace, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	name, err := newName()
	if err != nil {
		return nil, err
	}
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return nil, fmt.Errorf("netns: add %s: %w", name, err)
	}
	n := &Namespace{name: name, fd: -1, log: logging.Discard(log).With("netns", name)}
	if err := n.setup(ctx); err != nil {
		n.Close()
		return nil, err
	}
	n.log.Info("network namespace created")
	return n, nil
}

func newName() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("netns: random name: %w", err)
	}
	return fmt.Sprintf("%s%d-%s", Prefix, os.Getpid(), hex.EncodeToString(b)), nil
}

func (n *Namespace) setup(ctx context.Context) error {
	if err := run(ctx, "ip", "-n", n.name, "link", "set", "lo", "up"); err != nil {
		return fmt.Errorf("netns: lo up in %s: %w", n.name, err)
	}
	fd, err := unix.Open("/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: open handle of %s: %w", n.name, err)
	}
	n.fd = fd
	return n.setupChains(ctx)
}

// setupChains finds an iptables that works in the namespace (the nft one,
// else the legacy one) and hooks the drop and guard chains into INPUT.
func (n *Namespace) setupChains(ctx context.Context) error {
	var errs []error
	for _, ipt := range []string{"iptables", "iptables-legacy"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		err := n.tryChains(ctx, ipt)
		if err == nil {
			n.iptables = ipt
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("%w: no working iptables in %s: %w", ErrUnavailable, n.name, errors.Join(errs...))
}

func (n *Namespace) tryChains(ctx context.Context, ipt string) error {
	for _, args := range [][]string{
		{"-N", guardChain}, {"-A", "INPUT", "-j", guardChain},
		{"-N", dropChain}, {"-A", "INPUT", "-j", dropChain},
	} {
		if err := n.exec(ctx, ipt, append([]string{"-w"}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// Name returns the namespace's name (as `ip netns list` shows it).
func (n *Namespace) Name() string { return n.name }

// Command returns a command that runs name inside the namespace through
// `ip netns exec`, which execs it in place: the process id is the
// program's own, so signals reach it directly.
func (n *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...)
}

// exec runs name inside the namespace and returns its error with output.
func (n *Namespace) exec(ctx context.Context, name string, args ...string) error {
	return run(ctx, "ip", append([]string{"netns", "exec", n.name, name}, args...)...)
}

// Do runs fn on an OS thread that has entered the namespace. Sockets fn
// creates belong to the namespace for their whole life, whichever thread
// uses them later. fn must not start goroutines that create sockets: they
// would run elsewhere. The thread returns to the pool only after it is
// back in its original namespace; if that fails it is discarded.
func (n *Namespace) Do(fn func() error) error {
	if n.isClosed() {
		return ErrClosed
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: open own namespace: %w", err)
			return // still locked: the thread exits with this goroutine
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %w", n.name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", n.name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DialContext connects to addr inside the namespace from the harness
// address. It has the signature Kafka clients and http.Transport take.
func (n *Namespace) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.DialFrom(ctx, netip.Addr{}, network, addr)
}

// DialFrom connects to addr inside the namespace with source address
// from (the zero Addr lets the kernel pick 127.0.0.1).
func (n *Namespace) DialFrom(ctx context.Context, from netip.Addr, network, addr string) (net.Conn, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	d := net.Dialer{}
	if from.IsValid() {
		if !from.IsLoopback() {
			return nil, fmt.Errorf("%w: source %s", ErrOutsideLoopback, from)
		}
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	var c net.Conn
	err := n.Do(func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener inside the namespace.
func (n *Namespace) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	var l net.Listener
	err := n.Do(func() (err error) {
		var lc net.ListenConfig
		l, err = lc.Listen(ctx, network, addr)
		return err
	})
	return l, err
}

// checkLoopback accepts only literal loopback addresses, so no name
// lookup or stray traffic can leave the machine.
func checkLoopback(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q is not a literal ip:port: %w", ErrOutsideLoopback, addr, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("%w: %s", ErrOutsideLoopback, addr)
	}
	return nil
}

func (n *Namespace) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// Close kills every process still in the namespace, deletes it and
// releases its handle. Calling it again is a no-op.
func (n *Namespace) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	err := remove(context.Background(), n.name)
	if n.fd >= 0 {
		unix.Close(n.fd)
	}
	n.log.Info("network namespace removed", "err", err)
	return err
}

// remove kills the processes of namespace name and deletes it.
func remove(ctx context.Context, name string) error {
	killAll(ctx, name)
	if err := run(ctx, "ip", "netns", "del", name); err != nil {
		return fmt.Errorf("netns: delete %s: %w", name, err)
	}
	return nil
}

// killAll SIGKILLs every process `ip netns pids` lists for name.
func killAll(ctx context.Context, name string) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", name).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// run runs a command and folds its output into the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
