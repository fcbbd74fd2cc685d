package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Exit records a node process that ended without being killed or stopped
// by the cluster: a crash, which a test usually wants to report.
type Exit struct {
	Node int
	PID  int
	Err  string // exit status
	At   time.Time
}

// proc is one run of a node process.
type proc struct {
	node   int
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has been reaped
	err    error         // exit status, valid after done
	meant  atomic.Bool   // the cluster killed or stopped it
	paused atomic.Bool
}

// signal sends sig to the process group (the node and anything it forked).
func (p *proc) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func (p *proc) kill() {
	p.meant.Store(true)
	p.signal(syscall.SIGKILL)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// spawner starts processes from one OS thread that lives as long as the
// cluster, because a child's parent-death signal (Pdeathsig) fires when
// the thread that forked it exits, and Go may end other threads at any
// time. If the harness process dies, the kernel SIGKILLs every node.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the loop
	defer close(s.done)
	for r := range s.reqs {
		r.res <- r.cmd.Start()
	}
}

func (s *spawner) start(cmd *exec.Cmd) error {
	res := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, res: res}:
		return <-res
	case <-s.done:
		return ErrClosed
	}
}

// stop ends the spawner thread; call it only once every child is dead.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}

// command builds node n's command: the binary with its arguments, inside
// the namespace if there is one, in its own process group, with stdout
// and stderr appended to its log.
func (c *Cluster) command(n Node, log *os.File) *exec.Cmd {
	args := c.cfg.Args(n, c.Nodes())
	var cmd *exec.Cmd
	if c.ns != nil {
		cmd = c.ns.Command(c.cfg.Binary, args...)
	} else {
		cmd = exec.Command(c.cfg.Binary, args...)
	}
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), c.cfg.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start starts node id if it is not running and waits until it is ready
// (Config.Ready, up to StartTimeout). A running node is left alone.
func (c *Cluster) Start(ctx context.Context, id int) error {
	n, err := c.Node(id)
	if err != nil {
		return err
	}
	p, started, err := c.launch(n)
	if err != nil || !started {
		return err
	}
	return c.awaitReady(ctx, n, p)
}

// launch starts node n's process unless one is running.
func (c *Cluster) launch(n Node) (p *proc, started bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, ErrClosed
	}
	if p := c.procs[n.ID]; p != nil && !p.exited() {
		return p, false, nil
	}
	log, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("chaos: open log %s: %w", n.LogPath, err)
	}
	fmt.Fprintf(log, "=== chaos: starting node %d at %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	cmd := c.command(n, log)
	if err := c.spawn.start(cmd); err != nil {
		log.Close()
		return nil, false, fmt.Errorf("chaos: start node %d: %w", n.ID, err)
	}
	p = &proc{node: n.ID, cmd: cmd, done: make(chan struct{})}
	c.procs[n.ID] = p
	go c.reap(p, log)
	c.log.Info("node started", "node", n.ID, "pid", cmd.Process.Pid)
	return p, true, nil
}

// reap waits for p and records a crash if nobody meant it to end.
func (c *Cluster) reap(p *proc, log *os.File) {
	p.err = p.cmd.Wait()
	fmt.Fprintf(log, "=== chaos: node %d exited: %v\n", p.node, p.err)
	log.Close()
	if !p.meant.Load() {
		c.mu.Lock()
		c.crashes = append(c.crashes, Exit{Node: p.node, PID: p.cmd.Process.Pid, Err: fmt.Sprint(p.err), At: time.Now()})
		c.mu.Unlock()
		c.log.Warn("node exited on its own", "node", p.node, "err", p.err)
	}
	close(p.done)
}

func (c *Cluster) awaitReady(ctx context.Context, n Node, p *proc) error {
	if c.cfg.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.cfg.Ready(ctx, c, n)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("chaos: node %d exited before ready (%v); log tail:\n%s", n.ID, p.err, tail(n.LogPath, 2048))
		case <-ctx.Done():
			return fmt.Errorf("chaos: node %d not ready: %w (last: %w)", n.ID, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// tail returns the last limit bytes of a file, for error messages.
func tail(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, fi.Size()-limit)
	b := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(b, off)
	return strings.TrimSpace(string(b[:n]))
}

// StartAll starts every node that is not running, in parallel, and waits
// for all to be ready.
func (c *Cluster) StartAll(ctx context.Context) error {
	return c.EnsureRunning(ctx, c.NodeIDs()...)
}

// EnsureRunning starts those of ids that are not running, in parallel,
// and waits for them to be ready.
func (c *Cluster) EnsureRunning(ctx context.Context, ids ...int) error {
	errc := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errc <- c.Start(ctx, id) }()
	}
	var errs []error
	for range ids {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// running returns node id's live process, or nil.
func (c *Cluster) running(id int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil && !p.exited() {
		return p
	}
	return nil
}

// Running reports whether node id's process is alive (paused counts).
func (c *Cluster) Running(id int) bool { return c.running(id) != nil }

// Paused reports whether node id is stopped by Pause.
func (c *Cluster) Paused(id int) bool {
	p := c.running(id)
	return p != nil && p.paused.Load()
}

// PID returns node id's process id, or 0 when it is not running.
func (c *Cluster) PID(id int) int {
	if p := c.running(id); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Kill sends SIGKILL to each node of ids that runs (paused ones too) and
// waits until every one is reaped.
func (c *Cluster) Kill(ctx context.Context, ids ...int) error {
	var procs []*proc
	for _, id := range ids {
		if _, err := c.Node(id); err != nil {
			return err
		}
		if p := c.running(id); p != nil {
			p.kill()
			procs = append(procs, p)
		}
	}
	c.log.Info("killed", "nodes", ids)
	return waitAll(ctx, procs)
}

func waitAll(ctx context.Context, procs []*proc) error {
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("chaos: wait for node %d to exit: %w", p.node, ctx.Err())
		}
	}
	return nil
}

// KillAll kills every node.
func (c *Cluster) KillAll(ctx context.Context) error { return c.Kill(ctx, c.NodeIDs()...) }

// Stop asks node id to exit (SIGTERM, after SIGCONT if paused) and kills
// it if it has not exited within StopTimeout.
func (c *Cluster) Stop(ctx context.Context, id int) error {
	if _, err := c.Node(id); err != nil {
		return err
	}
	p := c.running(id)
	if p == nil {
		return nil
	}
	p.meant.Store(true)
	p.signal(syscall.SIGTERM)
	p.signal(syscall.SIGCONT)
	t := time.NewTimer(c.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		c.log.Warn("node ignored SIGTERM; killing", "node", id)
		p.kill()
		return waitAll(ctx, []*proc{p})
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
}

// Restart stops node id and starts it again.
func (c *Cluster) Restart(ctx context.Context, id int) error {
	if err := c.Stop(ctx, id); err != nil {
		return err
	}
	return c.Start(ctx, id)
}

// Pause sends SIGSTOP to each running node of ids and waits until each
// has stopped.
func (c *Cluster) Pause(ctx context.Context, ids ...int) error {
	if err := c.signalAll(ids, syscall.SIGSTOP, true); err != nil {
		return err
	}
	for _, id := range ids {
		if p := c.running(id); p != nil {
			if err := awaitStopped(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitStopped polls /proc until the process shows state T (stopped),
// or is gone.
func awaitStopped(ctx context.Context, p *proc) error {
	path := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for {
		b, err := os.ReadFile(path)
		if err != nil || p.exited() {
			return nil
		}
		// The state follows the ")" that closes the command name.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: node %d did not stop: %w", p.node, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Resume sends SIGCONT to each node of ids that Pause stopped.
func (c *Cluster) Resume(ctx context.Context, ids ...int) error {
	return c.signalAll(ids, syscall.SIGCONT, false)
}

// PauseFor pauses ids, waits d (or until ctx is done) and resumes them.
func (c *Cluster) PauseFor(ctx context.Context, d time.Duration, ids ...int) error {
	if err := c.Pause(ctx, ids...); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return c.Resume(context.WithoutCancel(ctx), ids...)
}

// ResumeAll resumes every paused node.
func (c *Cluster) ResumeAll(ctx context.Context) error { return c.Resume(ctx, c.NodeIDs()...) }

func (c *Cluster) signalAll(ids []int, sig syscall.Signal, paused bool) error {
	var errs []error
	for _, id := range ids {
		if _, err := c.Node(id); err != nil {
			return err
		}
		p := c.running(id)
		if p == nil {
			continue
		}
		if err := p.signal(sig); err != nil {
			errs = append(errs, fmt.Errorf("chaos: %s node %d: %w", sig, id, err))
			continue
		}
		p.paused.Store(paused)
	}
	c.log.Info("signalled", "signal", sig.String(), "nodes", ids)
	return errors.Join(errs...)
}

// Crashes returns every exit the cluster did not cause.
func (c *Cluster) Crashes() []Exit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Exit(nil), c.crashes...)
}

// LoseUnsynced simulates a power loss of the whole cluster: it kills
// every node, then drops every write not fsynced on every node's lazyfs.
// Nodes stay down; start them with StartAll. It returns what each node
// lost.
func (c *Cluster) LoseUnsynced(ctx context.Context) (map[int]LossReport, error) {
	return c.LoseUnsyncedNodes(ctx, c.NodeIDs()...)
}

// LoseUnsyncedNodes simulates a power loss of the nodes ids: it kills
// them, then drops every write not fsynced on their lazyfs mounts. The
// other nodes run on and keep everything they wrote, fsynced or not (a
// process crash loses nothing the kernel holds). The nodes hit stay down;
// start them with EnsureRunning. It returns what each node hit lost.
func (c *Cluster) LoseUnsyncedNodes(ctx context.Context, ids ...int) (map[int]LossReport, error) {
	if !c.cfg.LazyFS {
		return nil, ErrNoLazyFS
	}
	if err := c.Kill(ctx, ids...); err != nil {
		return nil, err
	}
	out := map[int]LossReport{}
	var errs []error
	for _, id := range ids {
		l, err := c.fs[id].LoseUnsynced()
		errs = append(errs, err)
		out[id] = LossReport{Files: l.Files, Bytes: l.Bytes}
	}
	c.log.Info("lost unsynced writes", "nodes", ids)
	return out, errors.Join(errs...)
}

// LossReport says what one node lost in a power loss.
type LossReport struct {
	Files int   // files that had writes not yet fsynced
	Bytes int64 // bytes dropped (whole pages)
}
