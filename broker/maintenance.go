package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/periodic"
)

// Maintenance mode on the node (Redpanda's): while group 0 has this
// broker in maintenance (coordinator.Broker.InMaintenance), the node
// hands every raft leadership it holds (data and __consumer_offsets
// partitions) to another replica, and group 0's to another voter, with
// the drain's own steps (handOffRound, handOffMetadata), but it proposes
// no controlled shutdown, keeps serving and stays in every ISR: group 0
// moved its ISR leaderships at apply and elects it only as the last
// clean choice. A raft election may still make it leader (raft cannot
// refuse a node its vote), so the loop hands over again at every round
// while the mark is on; leader balance hands it nothing back. The
// operator turns it on and off through the admin API
// (PUT/DELETE /v1/brokers/{id}/maintenance, any node), which proposes
// coordinator.SetMaintenance.

// maintenancePoll is how often a node in maintenance looks for
// leaderships it holds.
const maintenancePoll = 250 * time.Millisecond

// maintenanceLoop runs maintenanceRound until the node closes.
func (n *Node) maintenanceLoop(ctx context.Context) {
	periodic.Every(ctx, maintenancePoll, func() { n.maintenanceRound(ctx) })
}

// maintenanceRound hands over what this node leads while it is in
// maintenance, once this process start is registered (until then the
// metadata may be a replay that has since changed).
func (n *Node) maintenanceRound(ctx context.Context) {
	st := n.meta.View()
	if b, ok := st.Brokers[n.cfg.NodeID]; !ok || !b.InMaintenance || !n.ctl.RegisteredIn(st) {
		return
	}
	if moving := n.handOffRound(ctx, n.ledReplicas(), false); moving > 0 {
		n.log.Info("maintenance: partition leaderships handed over", "partitions", moving)
	}
	if !n.ctl.Status().IsLeader() {
		return
	}
	switch to, err := n.handOffMetadata(ctx); {
	case err == nil && to != 0:
		n.log.Info("maintenance: metadata leadership handed over", "to", to)
	case err != nil:
		n.log.Debug("maintenance: metadata leadership not handed over", "to", to, "err", err)
	}
}

// MaintenanceResult is the admin API's answer to a maintenance change.
type MaintenanceResult struct {
	ID          uint64 `json:"id"`
	Maintenance bool   `json:"maintenance"`
	Error       string `json:"error,omitempty"`
}

// maintenanceTimeout bounds the proposal of a maintenance change.
const maintenanceTimeout = 10 * time.Second

// serveMaintenance turns broker {id}'s maintenance mode on (PUT) or off
// (DELETE), as Redpanda's admin API does, and answers once the change is
// in this node's metadata: 200, or 400 for a bad id, 404 for an unknown
// broker, 409 when another broker is in maintenance or a broker's
// version cannot apply it, 503 without a metadata leader, 504 on a
// timeout.
func (n *Node) serveMaintenance(w http.ResponseWriter, r *http.Request) {
	on := r.Method == http.MethodPut
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		answerJSON(w, http.StatusBadRequest, MaintenanceResult{Error: "broker id " + strconv.Quote(r.PathValue("id")) + " is not a positive integer"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maintenanceTimeout)
	defer cancel()
	res := MaintenanceResult{ID: id, Maintenance: on}
	err = n.ctl.SetMaintenance(ctx, id, on)
	if err != nil {
		res.Maintenance = n.meta.View().InMaintenance() == id
		_, msg := coordinator.KafkaError(err)
		res.Error = *msg
	}
	answerJSON(w, maintenanceStatus(err), res)
}

// maintenanceStatus is the HTTP status for a maintenance change's error.
func maintenanceStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, kerr.BrokerNotAvailable):
		return http.StatusNotFound
	case errors.Is(err, kerr.InvalidRequest), errors.Is(err, kerr.UnsupportedVersion):
		return http.StatusConflict
	case errors.Is(err, coordinator.ErrNoController):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func answerJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// inMaintenance reports whether this node's metadata has it in
// maintenance.
func (n *Node) inMaintenance() bool {
	b, ok := n.meta.View().Brokers[n.cfg.NodeID]
	return ok && b.InMaintenance
}
