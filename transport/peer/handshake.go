package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Handshake layout (big-endian). The dialler sends a hello:
//
//	magic    4 bytes "RQPR"
//	version  uint16
//	stream   byte    streamRaft, streamSnapshot, streamFetch or streamJoin
//	from     uint64  the dialler's node id
//	to       uint64  the node id the dialler meant to reach
//	clen     byte, then clen bytes of cluster id
//	ilen     byte, then ilen bytes of incarnation (version 2)
//
// and the acceptor answers with a reply, whose layout never changes between
// versions so that a refused peer of any version learns why:
//
//	magic    4 bytes "RQPR"
//	version  uint16
//	code     byte    0 accepted, else a refusal code
//	node     uint64  the acceptor's node id
//	clen     byte, then clen bytes of cluster id
//	rlen     uint16, then rlen bytes of reason text
//	ilen     byte, then ilen bytes of incarnation (an acceptance only)
const (
	magic        = "RQPR"
	protoVersion = 2
	helloFixed   = 4 + 2 + 1 + 8 + 8 + 1
	replyFixed   = 4 + 2 + 1 + 8 + 1
	maxReason    = 1024
)

// Stream kinds a hello asks for.
const (
	streamRaft     byte = 1 // the long-lived connection for batches
	streamSnapshot byte = 2 // one snapshot, then closed
	streamFetch    byte = 3 // request/response, dialled by the fetching node
	streamJoin     byte = 4 // one request and its answer, from a node not yet a member (join.go)
)

type hello struct {
	version     uint16
	stream      byte
	from, to    uint64
	cluster     string
	incarnation string
}

type reply struct {
	version     uint16
	code        refusal
	node        uint64
	cluster     string
	reason      string
	incarnation string
}

func appendHello(dst []byte, h hello) []byte {
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, h.version)
	dst = append(dst, h.stream)
	dst = binary.BigEndian.AppendUint64(dst, h.from)
	dst = binary.BigEndian.AppendUint64(dst, h.to)
	dst = appendShortString(dst, h.cluster)
	return appendShortString(dst, h.incarnation)
}

// appendShortString appends a byte of length and up to 255 bytes of s.
func appendShortString(dst []byte, s string) []byte {
	s = s[:min(len(s), maxClusterID)]
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// readShortString reads what appendShortString wrote.
func readShortString(r io.Reader) (string, error) {
	var l [1]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", noEOF(err)
	}
	return readString(r, int(l[0]))
}

// readHello reads and checks a hello. A version mismatch returns ErrVersion
// without reading past the version field, since a later version may lay out
// the rest differently.
func readHello(r io.Reader) (hello, error) {
	var h hello
	var b [helloFixed]byte
	if _, err := io.ReadFull(r, b[:6]); err != nil {
		return h, fmt.Errorf("%w: read hello: %w", ErrBadHandshake, err)
	}
	if string(b[:4]) != magic {
		if looksLikeTLS(b[:3]) {
			return h, fmt.Errorf("%w: the peer opened a TLS handshake, and this node's peer port has no TLS configured", ErrBadHandshake)
		}
		return h, fmt.Errorf("%w: magic %q is not a raftq peer's", ErrBadHandshake, b[:4])
	}
	if h.version = binary.BigEndian.Uint16(b[4:6]); h.version != protoVersion {
		return h, fmt.Errorf("%w: peer speaks version %d, this node %d", ErrVersion, h.version, protoVersion)
	}
	if _, err := io.ReadFull(r, b[6:]); err != nil {
		return h, fmt.Errorf("%w: read hello: %w", ErrBadHandshake, noEOF(err))
	}
	h.stream = b[6]
	h.from = binary.BigEndian.Uint64(b[7:15])
	h.to = binary.BigEndian.Uint64(b[15:23])
	cluster, err := readString(r, int(b[23]))
	if err != nil {
		return h, fmt.Errorf("%w: read hello cluster id: %w", ErrBadHandshake, err)
	}
	h.cluster = cluster
	if h.incarnation, err = readShortString(r); err != nil {
		return h, fmt.Errorf("%w: read hello incarnation: %w", ErrBadHandshake, err)
	}
	return h, h.check()
}

func (h hello) check() error {
	switch {
	case h.stream != streamRaft && h.stream != streamSnapshot && h.stream != streamFetch && h.stream != streamJoin:
		return fmt.Errorf("%w: unknown stream kind %d", ErrBadHandshake, h.stream)
	case h.from == 0:
		return fmt.Errorf("%w: node id 0 (from %d, to %d)", ErrBadHandshake, h.from, h.to)
	case h.stream == streamJoin:
		return nil // a joining node may know neither the acceptor's id nor its cluster's
	case h.to == 0:
		return fmt.Errorf("%w: node id 0 (from %d, to %d)", ErrBadHandshake, h.from, h.to)
	case h.cluster == "":
		return fmt.Errorf("%w: empty cluster id", ErrBadHandshake)
	}
	return nil
}

func appendReply(dst []byte, rp reply) []byte {
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, rp.version)
	dst = append(dst, byte(rp.code))
	dst = binary.BigEndian.AppendUint64(dst, rp.node)
	cluster := rp.cluster[:min(len(rp.cluster), maxClusterID)]
	dst = append(dst, byte(len(cluster)))
	dst = append(dst, cluster...)
	reason := rp.reason[:min(len(rp.reason), maxReason)]
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(reason)))
	dst = append(dst, reason...)
	if rp.code != refuseNone || rp.version != protoVersion {
		return dst // a refusal keeps the layout every version reads
	}
	return appendShortString(dst, rp.incarnation)
}

// readReply reads a reply. It checks only the framing; what the reply says
// is judged by the dialler.
func readReply(r io.Reader) (reply, error) {
	var rp reply
	var b [replyFixed]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return rp, fmt.Errorf("%w: read reply: %w", ErrBadHandshake, err)
	}
	if string(b[:4]) != magic {
		return rp, fmt.Errorf("%w: reply magic %q is not a raftq peer's", ErrBadHandshake, b[:4])
	}
	rp.version = binary.BigEndian.Uint16(b[4:6])
	rp.code = refusal(b[6])
	rp.node = binary.BigEndian.Uint64(b[7:15])
	var err error
	if rp.cluster, err = readString(r, int(b[15])); err != nil {
		return rp, fmt.Errorf("%w: read reply cluster id: %w", ErrBadHandshake, err)
	}
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return rp, fmt.Errorf("%w: read reply reason: %w", ErrBadHandshake, noEOF(err))
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > maxReason {
		return rp, fmt.Errorf("%w: reply reason of %d bytes, limit %d", ErrBadHandshake, n, maxReason)
	}
	if rp.reason, err = readString(r, n); err != nil {
		return rp, fmt.Errorf("%w: read reply reason: %w", ErrBadHandshake, err)
	}
	if rp.code != refuseNone || rp.version != protoVersion {
		return rp, nil
	}
	if rp.incarnation, err = readShortString(r); err != nil {
		return rp, fmt.Errorf("%w: read reply incarnation: %w", ErrBadHandshake, err)
	}
	return rp, nil
}

func readString(r io.Reader, n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", noEOF(err)
	}
	return string(b), nil
}

// judgeReply is the dialler's verdict on the reply to a hello it sent to
// node want of cluster; check (may be nil) judges its incarnation.
func judgeReply(rp reply, want uint64, cluster string, check func(uint64, string) error) error {
	if rp.code != refuseNone {
		return &RefusedError{Node: rp.node, Reason: rp.reason, code: rp.code}
	}
	switch {
	case rp.version != protoVersion:
		return fmt.Errorf("%w: node %d accepted with version %d, this node speaks %d", ErrVersion, rp.node, rp.version, protoVersion)
	case rp.cluster != cluster:
		return fmt.Errorf("%w: node %d is in cluster %q, this node in %q", ErrClusterID, rp.node, rp.cluster, cluster)
	case rp.node != want:
		return fmt.Errorf("%w: dialled node %d, node %d answered", ErrWrongNode, want, rp.node)
	}
	return checkIncarnation(check, rp.node, rp.incarnation)
}

func checkIncarnation(check func(uint64, string) error, node uint64, incarnation string) error {
	if check == nil {
		return nil
	}
	if err := check(node, incarnation); err != nil {
		return fmt.Errorf("%w: %w", ErrIncarnation, err)
	}
	return nil
}

// looksLikeTLS tells whether a connection's first bytes are a TLS record
// header of a handshake: type 22, major version 3.
func looksLikeTLS(b []byte) bool {
	return len(b) >= 2 && b[0] == 0x16 && b[1] == 0x03
}

// isSilentProbe tells a connection that closed before saying anything (a
// port scan, a load balancer's health check) from a real bad handshake.
func isSilentProbe(err error) bool {
	return errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF)
}
