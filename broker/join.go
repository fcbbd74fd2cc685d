package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/peer"
)

// Joining a running cluster (Config.Seeds, raftq server --seeds). The
// seeds are peer addresses, the ones --initial-cluster lists: the peer
// listener is the one every node must reach on every other, and its
// handshake already tells clusters apart. The order:
//
//  1. probe: the node asks a seed over a join stream (peer.Join) whether
//     it may join as node id with its data dir's incarnation; the seed
//     answers with its cluster id and every peer address it knows, or
//     refuses (another cluster, an id registered from another data dir);
//  2. node.json is written with that cluster id, marked joining;
//  3. the transport starts with those peers, group 0 opens empty
//     (raftgroup.GroupConfig.Join);
//  4. admit: the seed proposes AdmitNode with the node's advertised peer
//     address; once committed, every node's transport learns the address
//     from the metadata (peers.go) and the metadata leader adds the node
//     to group 0 as a learner, after its own transport has it;
//  5. node.json loses its joining mark; the node registers through group
//     0 as every node does, and placement counts it once it is alive.
//
// A start that finds node.json marked joining (a crash between 2 and 5)
// repeats 1 and 4 with the same incarnation: admission is idempotent. A
// start that finds node.json unmarked restarts as any member does, its
// peers from the metadata it replays.

// join stream operations (joinRequest.Op).
const (
	joinProbe = "probe"
	joinAdmit = "admit"
)

// joinRequest is what a joining node sends a seed; its id and
// incarnation travel in the join stream's hello.
type joinRequest struct {
	Op       string `json:"op"`
	PeerAddr string `json:"peer_addr,omitempty"` // joinAdmit: the address to admit
}

// joinResponse is a seed's answer.
type joinResponse struct {
	Error string `json:"error,omitempty"`
	// Retry: the refusal may pass (no metadata leader yet); ask again.
	Retry bool `json:"retry,omitempty"`
	// Peers are every node's peer address the seed knows, itself
	// included, the joiner not.
	Peers map[uint64]string `json:"peers,omitempty"`
}

// joinPlan is what a joining node learnt from its seeds.
type joinPlan struct {
	incarnation string
	peers       map[uint64]string
}

// validateMembership checks the join and metadata voter settings.
func (c *Config) validateMembership() error {
	switch {
	case len(c.Seeds) > 0 && len(c.InitialCluster) > 0:
		return errors.New("broker: seeds and an initial cluster are exclusive: seeds join a running cluster, an initial cluster starts one")
	case !slices.Contains([]int{0, 1, 3, 5}, c.MetadataVoters):
		return fmt.Errorf("broker: metadata voters %d: want 1, 3 or 5", c.MetadataVoters)
	case c.VoterReplaceAfter < 0:
		return fmt.Errorf("broker: voter replace after %s is negative", c.VoterReplaceAfter)
	case len(c.Seeds) > 0 && c.JoinTimeout <= 0:
		return fmt.Errorf("broker: join timeout %s must be positive", c.JoinTimeout)
	case c.AdvertisedPeerAddr != "" && !coordinator.Dialable(c.AdvertisedPeerAddr):
		return fmt.Errorf("broker: advertised peer address %q is not a host:port other nodes can dial", c.AdvertisedPeerAddr)
	}
	for _, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("broker: seed %q: %w", s, err)
		}
	}
	return nil
}

// planJoin runs the first two steps of a join when the node has seeds
// and is not yet a member; nil when there is nothing to join.
func (n *Node) planJoin() (*joinPlan, error) {
	if len(n.cfg.Seeds) == 0 {
		return nil, nil
	}
	id, ok, err := readIdentity(n.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if ok && (id.NodeID != n.cfg.NodeID || n.cfg.ClusterID != "" && id.ClusterID != n.cfg.ClusterID) {
		return nil, fmt.Errorf("data dir %s belongs to cluster %q node %d, not cluster %q node %d",
			n.cfg.DataDir, id.ClusterID, id.NodeID, n.cfg.ClusterID, n.cfg.NodeID)
	}
	if ok && !id.Joining {
		n.cfg.ClusterID = id.ClusterID
		n.log.Info("the data dir holds a member's data: restarting without the seeds", "cluster", id.ClusterID)
		return nil, nil
	}
	if !ok {
		id = identity{ClusterID: n.cfg.ClusterID, NodeID: n.cfg.NodeID, Incarnation: newIncarnation(), Joining: true}
	}
	cluster, resp, err := n.askSeeds(id, joinRequest{Op: joinProbe})
	if err != nil {
		return nil, err
	}
	id.ClusterID = cluster
	n.cfg.ClusterID = cluster
	if err := os.MkdirAll(n.cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", n.cfg.DataDir, err)
	}
	if err := writeIdentity(filepath.Join(n.cfg.DataDir, "node.json"), id); err != nil {
		return nil, err
	}
	delete(resp.Peers, n.cfg.NodeID)
	n.log.Info("joining cluster", "cluster", cluster, "peers", len(resp.Peers))
	return &joinPlan{incarnation: id.Incarnation, peers: resp.Peers}, nil
}

// finishJoin asks a seed to admit the node (step 4), then records in
// node.json that it is a member (step 5).
func (n *Node) finishJoin(plan *joinPlan) error {
	if plan == nil {
		return nil
	}
	addr := n.peerAdvert()
	if !coordinator.Dialable(addr) {
		return fmt.Errorf("join: peer address %s is a wildcard other nodes cannot dial; set --advertise-peer-addr", addr)
	}
	id := identity{ClusterID: n.cfg.ClusterID, NodeID: n.cfg.NodeID, Incarnation: plan.incarnation, Joining: true}
	if _, _, err := n.askSeeds(id, joinRequest{Op: joinAdmit, PeerAddr: addr}); err != nil {
		return err
	}
	id.Joining = false
	if err := writeIdentity(filepath.Join(n.cfg.DataDir, "node.json"), id); err != nil {
		return err
	}
	n.log.Info("admitted to the cluster", "cluster", n.cfg.ClusterID, "peer", addr)
	return nil
}

// askSeeds sends req to each seed in turn, over again with backoff,
// until one answers or JoinTimeout passes. A refusal that asking again
// cannot change (another cluster, a node id taken) ends it at once.
func (n *Node) askSeeds(id identity, req joinRequest) (cluster string, resp joinResponse, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", resp, err
	}
	jc := peer.JoinConfig{NodeID: id.NodeID, ClusterID: id.ClusterID, Incarnation: id.Incarnation, Dial: peerDialer(n.cfg.PeerAddr), TLS: n.joinTLS()}
	deadline := time.Now().Add(n.cfg.JoinTimeout)
	last := map[string]error{}
	backoff := 100 * time.Millisecond
	for {
		for _, seed := range n.cfg.Seeds {
			cluster, resp, err := n.askSeed(jc, seed, body, deadline)
			if err == nil {
				return cluster, resp, nil
			}
			var refused *peer.RefusedError
			if errors.As(err, &refused) && !errors.Is(err, peer.ErrClosed) || errors.Is(err, errJoinRefused) || errors.Is(err, peer.ErrCertificate) {
				return "", resp, fmt.Errorf("join: seed %s refused node %d: %w", seed, id.NodeID, err)
			}
			last[seed] = err
			n.log.Info("join: seed did not answer", "seed", seed, "op", req.Op, "err", err)
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			return "", resp, seedsError(n.cfg.Seeds, last, n.cfg.JoinTimeout)
		}
		time.Sleep(wait) // between rounds of dials: nothing to wait on
		backoff = min(2*backoff, 2*time.Second)
	}
}

// errJoinRefused marks a seed's refusal that asking again cannot change.
var errJoinRefused = errors.New("refused")

func (n *Node) askSeed(jc peer.JoinConfig, seed string, body []byte, deadline time.Time) (string, joinResponse, error) {
	var resp joinResponse
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx, cancelAsk := context.WithTimeout(ctx, peer.JoinTimeout)
	defer cancelAsk()
	a, err := peer.Join(ctx, jc, seed, body)
	if err != nil {
		return "", resp, err
	}
	if err := json.Unmarshal(a.Response, &resp); err != nil {
		return "", resp, fmt.Errorf("node %d answered %q: %w", a.Node, a.Response, err)
	}
	switch {
	case resp.Error != "" && resp.Retry:
		return "", resp, fmt.Errorf("node %d: %s", a.Node, resp.Error)
	case resp.Error != "":
		return "", resp, fmt.Errorf("%w by node %d: %s", errJoinRefused, a.Node, resp.Error)
	}
	if resp.Peers == nil {
		resp.Peers = map[uint64]string{}
	}
	if _, ok := resp.Peers[a.Node]; !ok {
		resp.Peers[a.Node] = seed // the seed's own advertised address is a wildcard: use the one that answered
	}
	return a.ClusterID, resp, nil
}

// seedsError names every seed tried and how each last failed.
func seedsError(seeds []string, last map[string]error, timeout time.Duration) error {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprintf("%s (%v)", s, last[s])
	}
	return fmt.Errorf("join: no seed answered within %s; tried %s", timeout, strings.Join(parts, ", "))
}

// serveJoin is the transport's JoinHandler: a seed's side of a join.
func (n *Node) serveJoin(ctx context.Context, from uint64, incarnation string, body []byte) []byte {
	var req joinRequest
	resp := n.answerJoin(ctx, from, incarnation, body, &req)
	b, err := json.Marshal(resp)
	if err != nil {
		b = []byte(`{"error":"encode answer"}`)
	}
	n.log.Info("join request", "joiner", from, "op", req.Op, "err", resp.Error)
	return b
}

func (n *Node) answerJoin(ctx context.Context, from uint64, incarnation string, body []byte, req *joinRequest) joinResponse {
	if err := json.Unmarshal(body, req); err != nil {
		return joinResponse{Error: fmt.Sprintf("malformed join request: %v", err)}
	}
	if err := coordinator.CheckAdmission(n.meta.View(), from, incarnation); err != nil {
		return joinResponse{Error: refusalText(err)}
	}
	switch req.Op {
	case joinProbe:
	case joinAdmit:
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		err := n.admit(pctx, from, req.PeerAddr, incarnation)
		var refused *coordinator.Error
		switch {
		case errors.As(err, &refused):
			return joinResponse{Error: refused.Msg}
		case err != nil:
			return joinResponse{Error: fmt.Sprintf("admission not committed: %v", err), Retry: true}
		}
	default:
		return joinResponse{Error: fmt.Sprintf("unknown join operation %q", req.Op)}
	}
	peers := n.knownPeers()
	delete(peers, from)
	return joinResponse{Peers: peers}
}

// admit has group 0 admit node id at peer address addr from the data
// directory incarnation; a refusal is a *coordinator.Error.
func (n *Node) admit(ctx context.Context, id uint64, addr, incarnation string) error {
	cmd := &coordinator.Command{AdmitNode: &coordinator.AdmitNode{ID: id, PeerAddr: addr, Incarnation: incarnation}}
	res, err := n.ctl.ProposeRetry(ctx, cmd)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	return nil
}

// refusalText is a metadata command's refusal without its Kafka code's
// generic text.
func refusalText(err error) string {
	var ce *coordinator.Error
	if errors.As(err, &ce) {
		return ce.Msg
	}
	return err.Error()
}

// knownPeers is every node's peer address this node knows: its
// transport's (the initial cluster's, which may name hosts), those the
// metadata holds (advertised by the nodes themselves), and its own.
func (n *Node) knownPeers() map[uint64]string {
	out := n.peer.Peers()
	maps.Copy(out, n.meta.View().PeerAddrs())
	if addr := n.peerAdvert(); coordinator.Dialable(addr) {
		out[n.cfg.NodeID] = addr
	}
	return out
}

// peerAdvert is the peer address this node gives others.
func (n *Node) peerAdvert() string {
	if n.cfg.AdvertisedPeerAddr != "" {
		return n.cfg.AdvertisedPeerAddr
	}
	return n.peer.Addr().String()
}
