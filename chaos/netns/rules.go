package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// Rule drops every packet from From to To. All addresses live on lo
// inside the namespace, so a packet is matched on its source and
// destination in INPUT.
type Rule struct {
	From, To netip.Addr
}

func (r Rule) String() string { return r.From.String() + "->" + r.To.String() }

// Drop replaces the drop rules with rules, atomically (one
// iptables-restore): at no instant is a mix of the old and new set in
// force. Packets are dropped silently, so TCP peers see timeouts, as
// behind a real partition. An empty set heals.
func (n *Namespace) Drop(ctx context.Context, rules []Rule) error {
	for _, r := range rules {
		if !r.From.IsLoopback() || !r.To.IsLoopback() {
			return fmt.Errorf("%w: rule %s", ErrOutsideLoopback, r)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n", dropChain)
	for _, r := range rules {
		fmt.Fprintf(&b, "-A %s -s %s/32 -d %s/32 -j DROP\n", dropChain, r.From, r.To)
	}
	b.WriteString("COMMIT\n")
	if err := n.restore(ctx, b.String()); err != nil {
		return err
	}
	n.rules = slices.Clone(rules)
	n.log.Info("drop rules set", "rules", len(rules))
	return nil
}

// Heal removes every drop rule.
func (n *Namespace) Heal(ctx context.Context) error { return n.Drop(ctx, nil) }

// Rules returns the drop rules in force.
func (n *Namespace) Rules() []Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.rules)
}

// Guard rejects TCP connections from the harness address to dsts. Use it
// for ports only nodes dial (the peer port): a connection to them from
// 127.0.0.1 means a node dialed without binding its own address, which
// would let its traffic slip past every partition. Rejected with a reset,
// so such a node fails at once and visibly. Replaces earlier guards.
func (n *Namespace) Guard(ctx context.Context, dsts []netip.AddrPort) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n", guardChain)
	for _, d := range dsts {
		if !d.Addr().IsLoopback() {
			return fmt.Errorf("%w: guard %s", ErrOutsideLoopback, d)
		}
		fmt.Fprintf(&b, "-A %s -p tcp -s %s/32 -d %s/32 --dport %d -j REJECT --reject-with tcp-reset\n",
			guardChain, HarnessAddr, d.Addr(), d.Port())
	}
	b.WriteString("COMMIT\n")
	return n.restore(ctx, b.String())
}

// restore feeds an iptables-restore script (--noflush: only the chains it
// declares are flushed and refilled).
func (n *Namespace) restore(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.name, n.iptables+"-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netns: %s-restore in %s: %w: %s", n.iptables, n.name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Listing returns `iptables -S` inside the namespace, for diagnostics.
func (n *Namespace) Listing(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.name, n.iptables, "-w", "-S").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("netns: list rules in %s: %w: %s", n.name, err, out)
	}
	return string(out), nil
}
