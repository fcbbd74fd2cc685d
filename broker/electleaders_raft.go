package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
)

// A preferred election of a raft partition is a leadership transfer to
// its first replica, and only the leader of the partition's raft group
// can make one. The node that answers the ElectLeaders request finds the
// leader (its own replica's view, else the metadata's leadership hint)
// and asks it through its admin API:
//
//	POST /v1/raft/{group}/transfer_leadership?target=ID&timeout_ms=MS
//
// which answers, as JSON (transferAnswer), a Kafka error code: 0 once
// the target leads, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// or NOT_LEADER_OR_FOLLOWER with the leader it knows, which the asking
// node asks next. The admin API already carries the operator's requests
// between tools and nodes (cluster status reads every node's); the peer
// transport's request stream is the ISR followers' fetch path, one
// request outstanding per peer, where a transfer waiting for its target
// to catch up would hold fetches back.

// transferAnswer is a raft leader's answer to a transfer request.
type transferAnswer struct {
	Code    int16  `json:"error_code"`
	Message string `json:"error_message,omitempty"`
	// Leader is who leads as the answering node knows it (0: unknown):
	// with NOT_LEADER_OR_FOLLOWER, the node to ask instead.
	Leader uint64 `json:"leader"`
}

// electRetryPause spaces the rounds of a raft preferred election that
// found no leader, or a leader that could not be asked.
const electRetryPause = 50 * time.Millisecond

// electRaftPreferred transfers raft partition p's leadership to its
// first replica, through whichever node leads it, and returns the
// partition's ElectLeaders code and message once the transfer took
// effect (this node's metadata names the new leader, or a moment
// later) or ctx ended.
func (n *Node) electRaftPreferred(ctx context.Context, p *coordinator.Partition) (int16, string) {
	to := p.Replicas[0]
	if b, ok := n.meta.View().Brokers[to]; !ok || !b.TakesLeadership() {
		return kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("preferred replica %d %s", to, unavailable(b))
	}
	var hint uint64
	for {
		leader := hint
		if leader == 0 {
			leader = n.raftLeaderOf(p.Group)
		}
		ans := n.askTransfer(ctx, leader, p.Group, to)
		switch ans.Code {
		case 0:
			n.awaitLeaderHint(ctx, p.Group, to)
			return 0, ""
		case kerr.ElectionNotNeeded.Code, kerr.PreferredLeaderNotAvailable.Code, kerr.InvalidRequest.Code:
			return ans.Code, ans.Message
		}
		if hint = ans.Leader; hint == leader {
			hint = 0
		}
		select {
		case <-time.After(electRetryPause):
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code, "no transfer to the preferred replica before the request's timeout: " + ans.Message
		}
	}
}

// unavailable says why broker b may not be handed a leadership.
func unavailable(b *coordinator.Broker) string {
	switch {
	case b == nil:
		return "is not registered"
	case !b.Alive:
		return "is not alive"
	case b.ShuttingDown:
		return "is in controlled shutdown"
	case b.InMaintenance:
		return "is in maintenance"
	}
	return "may lead"
}

// raftLeaderOf is the leader of raft group gid as this node's Metadata
// answers name it (leaderOf: its own replica's view, else the leadership
// hint), 0 when none is known.
func (n *Node) raftLeaderOf(gid uint64) uint64 {
	ref, ok := n.meta.View().PartitionByGroup(gid)
	if !ok {
		return 0
	}
	leader, _ := n.leaderOf(ref.Partition)
	return leader
}

// askTransfer has node leader transfer group gid's leadership to node
// to: itself if leader is this node, else through leader's admin API.
// A failure to ask is LEADER_NOT_AVAILABLE (retriable).
func (n *Node) askTransfer(ctx context.Context, leader, gid, to uint64) transferAnswer {
	switch {
	case leader == 0:
		return transferAnswer{Code: kerr.LeaderNotAvailable.Code, Message: fmt.Sprintf("no leader of raft group %d is known", gid)}
	case leader == n.cfg.NodeID:
		return n.transferLeader(ctx, gid, to)
	}
	b, ok := n.meta.View().Brokers[leader]
	if !ok || b.AdminAddr == "" {
		return transferAnswer{Code: kerr.LeaderNotAvailable.Code, Message: fmt.Sprintf("leader %d of raft group %d has no admin address", leader, gid)}
	}
	ans, err := n.postTransfer(ctx, b.AdminAddr, gid, to)
	if err != nil {
		return transferAnswer{Code: kerr.LeaderNotAvailable.Code, Message: fmt.Sprintf("ask leader %d of raft group %d: %s", leader, gid, err)}
	}
	return ans
}

// transferMargin is how much sooner than the asking node's deadline the
// leader must answer, so that its answer arrives in time.
const transferMargin = 250 * time.Millisecond

func (n *Node) postTransfer(ctx context.Context, adminAddr string, gid, to uint64) (transferAnswer, error) {
	var ans transferAnswer
	wait := time.Minute
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d) - transferMargin
	}
	if wait <= 0 {
		return ans, context.DeadlineExceeded
	}
	url := fmt.Sprintf("%s://%s/v1/raft/%d/transfer_leadership?target=%d&timeout_ms=%d", n.adminScheme(), adminAddr, gid, to, wait.Milliseconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return ans, err
	}
	resp, err := n.adminHTTP().Do(req) // node_tls.go
	if err != nil {
		return ans, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return ans, json.NewDecoder(resp.Body).Decode(&ans)
}

// transferAttempts bounds the transfer attempts of one preferred
// election: the leader takes no appends while a transfer is under way,
// so one that cannot complete must not be tried until the request's
// timeout.
const transferAttempts = 3

// transferLeader hands group gid's leadership to node to if this node
// leads it, in up to transferAttempts attempts of two election timeouts
// each (raft gives a transfer up after one), bounded by ctx. The target
// must be a voter that this node hears from and in sync by the leader's
// raft progress (insync_raft.go), as Kafka's preferred replica must be
// alive and in the ISR.
func (n *Node) transferLeader(ctx context.Context, gid, to uint64) transferAnswer {
	r := n.replicaByGroup(gid)
	if r == nil || r.isr() != nil {
		return transferAnswer{Code: kerr.NotLeaderForPartition.Code, Message: fmt.Sprintf("node %d hosts no raft replica of group %d", n.cfg.NodeID, gid),
			Leader: n.hintedLeader(gid)}
	}
	var failed error
	for attempt := 0; ; attempt++ {
		l := r.lead.Leadership()
		switch {
		case l.IsLeader && n.cfg.NodeID == to:
			return transferAnswer{Code: kerr.ElectionNotNeeded.Code, Message: fmt.Sprintf("preferred replica %d leads already", to), Leader: to}
		case l.Leader == to && failed != nil:
			return transferAnswer{Leader: to} // an attempt that gave up waiting did go through
		case !l.IsLeader:
			return transferAnswer{Code: kerr.NotLeaderForPartition.Code, Message: fmt.Sprintf("node %d does not lead raft group %d", n.cfg.NodeID, gid), Leader: l.Leader}
		case failed != nil && (attempt == transferAttempts || ctx.Err() != nil):
			return transferAnswer{Code: kerr.PreferredLeaderNotAvailable.Code, Leader: n.cfg.NodeID,
				Message: fmt.Sprintf("leadership transfer to replica %d did not complete in %d attempts: %s", to, attempt, failed)}
		}
		if ans, ok := n.transferCheck(r, to); !ok {
			return ans
		}
		tctx, cancel := context.WithTimeout(ctx, n.transferTimeout())
		err := r.lead.TransferLeadership(tctx, to)
		cancel()
		if err == nil {
			return transferAnswer{Leader: to}
		}
		n.log.Debug("preferred election transfer", "topic", r.topic, "partition", r.index, "to", to, "err", err)
		failed = err
		select {
		case <-time.After(electRetryPause):
		case <-ctx.Done():
		}
	}
}

// transferCheck refuses a transfer raft would not make, or not soon: to
// a replica that is not a voter of the group, that this node does not
// hear from, or that lags behind the leader's log for longer than
// ReplicaLagTimeMax.
func (n *Node) transferCheck(r *replica, to uint64) (transferAnswer, bool) {
	refuse := func(format string, args ...any) (transferAnswer, bool) {
		return transferAnswer{Code: kerr.PreferredLeaderNotAvailable.Code, Leader: n.cfg.NodeID, Message: fmt.Sprintf(format, args...)}, false
	}
	if !slices.Contains(r.lead.describe().Voters, to) {
		return refuse("replica %d is not a voter of raft group %d", to, r.gid)
	}
	if s, _ := n.peer.PeerStats(to); !s.Connected {
		return refuse("leader %d of raft group %d is not connected to replica %d", n.cfg.NodeID, r.gid, to)
	}
	if lv, ok := r.lead.(laggingVoters); ok {
		if lagging, _ := lv.lagging(time.Now(), n.cfg.ReplicaLagTimeMax); lagging[to] {
			return refuse("replica %d is not in sync: its log has trailed the leader's for over %s", to, n.cfg.ReplicaLagTimeMax)
		}
	}
	return transferAnswer{}, true
}

// hintedLeader is the metadata's leader hint for group gid (0: none).
func (n *Node) hintedLeader(gid uint64) uint64 {
	if ref, ok := n.meta.View().PartitionByGroup(gid); ok {
		return ref.Partition.Leader
	}
	return 0
}

// hintWait bounds the wait for the new leader's hint after a transfer.
const hintWait = 3 * time.Second

// awaitLeaderHint waits, at most hintWait or until ctx ends, until this
// node's metadata names to the leader of group gid, so that its Metadata
// answers right after the election name the new leader: the new leader
// proposes its hint within its hint loop's 100 ms.
func (n *Node) awaitLeaderHint(ctx context.Context, gid, to uint64) {
	ctx, cancel := context.WithTimeout(ctx, hintWait)
	defer cancel()
	for {
		changed := n.meta.Changed()
		if n.hintedLeader(gid) == to {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// serveTransferLeadership is the admin endpoint a node answering
// ElectLeaders asks the raft leader with (transferAnswer).
func (n *Node) serveTransferLeadership(w http.ResponseWriter, r *http.Request) {
	gid, err1 := strconv.ParseUint(r.PathValue("group"), 10, 64)
	to, err2 := strconv.ParseUint(r.URL.Query().Get("target"), 10, 64)
	ms, err3 := strconv.ParseInt(r.URL.Query().Get("timeout_ms"), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || gid == coordinator.MetadataGroup || to == 0 || ms <= 0 {
		answerJSON(w, http.StatusBadRequest, transferAnswer{Code: kerr.InvalidRequest.Code,
			Message: "want POST /v1/raft/{group}/transfer_leadership?target=ID&timeout_ms=MS with a partition's group, a node id and a positive timeout"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(ms)*time.Millisecond)
	defer cancel()
	answerJSON(w, http.StatusOK, n.transferLeader(ctx, gid, to))
}
