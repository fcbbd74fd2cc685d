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

	"github.com/raftq/raftq/coordinator"
)

// The admin API's broker changes, for raftq cluster decommission,
// recommission and remove:
//
//	POST /v1/brokers/{id}/decommission   move every replica off, place nothing new
//	POST /v1/brokers/{id}/recommission   stop that, cancelling its moves
//	POST /v1/brokers/{id}/remove         forget a broker that holds nothing
//
// Each answers 200 with the broker's progress (BrokerProgress), or an
// error as {"error": ...} with 400 for a refused change, 503 without a
// metadata leader.

// BrokerProgress is what a broker still holds.
type BrokerProgress struct {
	ID             uint64 `json:"id"`
	Decommissioned bool   `json:"decommissioned"`
	Replicas       int    `json:"replicas"` // partition replicas placed on it
	Moving         int    `json:"moving"`   // of those, how many are moving
	Removable      bool   `json:"removable"`
	Removed        bool   `json:"removed,omitempty"`
}

func (n *Node) routeBrokerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/brokers/{id}/{action}", n.serveBrokerChange)
	mux.HandleFunc("GET /v1/brokers/{id}", n.serveBrokerProgress)
}

func (n *Node) serveBrokerChange(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		adminError(w, http.StatusBadRequest, errors.New("broker ids are positive integers"))
		return
	}
	var cmd coordinator.Command
	switch r.PathValue("action") {
	case "decommission":
		if err := n.checkVotersLeft(id); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
		cmd.Decommission = &coordinator.Decommission{ID: id, On: true}
	case "recommission":
		cmd.Decommission = &coordinator.Decommission{ID: id}
	case "remove":
		if n.metadataVoter(id) {
			adminError(w, http.StatusBadRequest, fmt.Errorf("broker %d still votes in the metadata group: decommission it and wait until it holds nothing (its vote moves too)", id))
			return
		}
		cmd.RemoveBroker = &coordinator.RemoveBroker{ID: id}
	default:
		adminError(w, http.StatusNotFound, errors.New("want decommission, recommission or remove"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	res, err := n.ctl.Propose(ctx, &cmd)
	switch {
	case err != nil:
		adminError(w, http.StatusServiceUnavailable, err)
		return
	case res.Err != nil:
		adminError(w, http.StatusBadRequest, res.Err)
		return
	}
	writeJSON(w, n.brokerProgress(n.meta.View(), id))
}

func (n *Node) serveBrokerProgress(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		adminError(w, http.StatusBadRequest, errors.New("broker ids are positive integers"))
		return
	}
	writeJSON(w, n.brokerProgress(n.meta.View(), id))
}

func (n *Node) brokerProgress(s *coordinator.State, id uint64) BrokerProgress {
	b, ok := s.Brokers[id]
	out := BrokerProgress{ID: id, Removed: !ok}
	if !ok {
		return out
	}
	refs := s.PartitionsOf(id)
	out.Decommissioned, out.Replicas = b.Decommissioned, len(refs)
	for _, ref := range refs {
		if ref.Partition.Moving() {
			out.Moving++
		}
	}
	out.Removable = b.Decommissioned && len(refs) == 0 && !n.metadataVoter(id)
	return out
}

// checkVotersLeft refuses to decommission id when the brokers left would
// be fewer than a majority of group 0's voters: the metadata group would
// shrink below the fault tolerance it was given in one step.
func (n *Node) checkVotersLeft(id uint64) error {
	s := n.meta.View()
	left := 0
	for bid, b := range s.Brokers {
		if bid != id && !b.Decommissioned {
			left++
		}
	}
	if voters := len(n.ctl.Status().Voters); left < voters/2+1 {
		return fmt.Errorf("decommissioning broker %d leaves %d brokers, fewer than a majority of the metadata group's %d voters", id, left, voters)
	}
	return nil
}

// metadataVoter reports whether id votes in group 0, as this node sees
// it: a node removed while it votes, coming back on an empty disk, could
// vote for a leader that lacks committed metadata.
func (n *Node) metadataVoter(id uint64) bool {
	st := n.ctl.Status()
	return slices.Contains(st.Voters, id) || slices.Contains(st.VotersOutgoing, id)
}

func adminError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
