package peer

import (
	"errors"
	"fmt"
)

// Sentinel errors. Handshake refusals wrap one of the Err*Mismatch / ErrWrong*
// / ErrDuplicateID / ErrUnknownPeer sentinels on both sides of the connection:
// the refusing side returns it, the refused side gets a *RefusedError that
// unwraps to it.
var (
	ErrClosed          = errors.New("peer: transport closed")
	ErrStarted         = errors.New("peer: transport already started")
	ErrUnknownPeer     = errors.New("peer: unknown peer")
	ErrFrameTooLarge   = errors.New("peer: frame too large")
	ErrCorruptFrame    = errors.New("peer: corrupt frame")
	ErrBadHandshake    = errors.New("peer: malformed handshake")
	ErrVersion         = errors.New("peer: protocol version mismatch")
	ErrClusterID       = errors.New("peer: cluster id mismatch")
	ErrDuplicateID     = errors.New("peer: duplicate node id")
	ErrIncarnation     = errors.New("peer: node id presented from another data directory")
	ErrWrongNode       = errors.New("peer: reached a different node than dialled")
	ErrWrongDirection  = errors.New("peer: raft stream dialled by the higher node id")
	ErrSnapshotBusy    = errors.New("peer: too many snapshot streams")
	ErrSnapshotFailed  = errors.New("peer: snapshot rejected by receiver")
	ErrMessageTooLarge = errors.New("peer: message larger than max frame bytes")
	ErrNoFetchHandler  = errors.New("peer: node serves no fetch stream")
	ErrFetchTooLarge   = errors.New("peer: fetch request or response larger than max fetch bytes")
	ErrFetchAborted    = errors.New("peer: fetch stream ended before the response")
	ErrNoJoinHandler   = errors.New("peer: node serves no join stream")
	ErrTLS             = errors.New("peer: TLS handshake failed")
	ErrCertificate     = errors.New("peer: certificate refused")
)

// refusal is the code a handshake reply carries. Its values are part of the
// wire format.
type refusal byte

const (
	refuseNone refusal = iota
	refuseMalformed
	refuseVersion
	refuseCluster
	refuseDuplicate
	refuseWrongNode
	refuseUnknown
	refuseDirection
	refuseBusy
	refuseClosing
	refuseIncarnation
	refuseNoFetch
	refuseNoJoin
	refuseTLS
	refuseCertificate
)

var refusalErrs = map[refusal]error{
	refuseMalformed:   ErrBadHandshake,
	refuseVersion:     ErrVersion,
	refuseCluster:     ErrClusterID,
	refuseDuplicate:   ErrDuplicateID,
	refuseWrongNode:   ErrWrongNode,
	refuseUnknown:     ErrUnknownPeer,
	refuseDirection:   ErrWrongDirection,
	refuseBusy:        ErrSnapshotBusy,
	refuseClosing:     ErrClosed,
	refuseIncarnation: ErrIncarnation,
	refuseNoFetch:     ErrNoFetchHandler,
	refuseNoJoin:      ErrNoJoinHandler,
	refuseTLS:         ErrTLS,
	refuseCertificate: ErrCertificate,
}

// refusalOf picks the code that tells a refused peer why.
func refusalOf(err error) refusal {
	for code, sentinel := range refusalErrs {
		if errors.Is(err, sentinel) {
			return code
		}
	}
	return refuseMalformed
}

// RefusedError is what the dialling side gets when the remote node refused
// its handshake. It unwraps to the matching sentinel (ErrClusterID, …).
type RefusedError struct {
	Node   uint64 // the node that refused, as it named itself
	Reason string // the remote's own explanation
	code   refusal
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("peer: handshake refused by node %d: %s", e.Node, e.Reason)
}

// Unwrap returns the sentinel for the refusal code.
func (e *RefusedError) Unwrap() error {
	if err, ok := refusalErrs[e.code]; ok {
		return err
	}
	return ErrBadHandshake
}
