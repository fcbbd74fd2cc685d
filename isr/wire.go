package isr

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Followers and leaders speak Kafka's own follower protocol on the peer
// transport's fetch stream: a FetchRequest with ReplicaState, CurrentLeaderEpoch,
// FetchOffset, LastFetchedEpoch and LogStartOffset, and a FetchResponse with
// HighWatermark, LogStartOffset, DivergingEpoch and the records. Each
// message is the 2-byte version, then kmsg's encoding of the body.
const fetchVersion int16 = 15

var errBadMessage = errors.New("isr: malformed fetch message")

func encodeFetchRequest(r *kmsg.FetchRequest) []byte {
	r.Version = fetchVersion
	return r.AppendTo(binary.BigEndian.AppendUint16(nil, uint16(fetchVersion)))
}

func encodeFetchResponse(r *kmsg.FetchResponse) []byte {
	r.Version = fetchVersion
	return r.AppendTo(binary.BigEndian.AppendUint16(nil, uint16(fetchVersion)))
}

func messageVersion(b []byte) (int16, []byte, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", errBadMessage, len(b))
	}
	v := int16(binary.BigEndian.Uint16(b))
	if v != fetchVersion {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", errBadMessage, v, fetchVersion)
	}
	return v, b[2:], nil
}

func decodeFetchRequest(b []byte) (*kmsg.FetchRequest, error) {
	v, body, err := messageVersion(b)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrFetchRequest()
	r.Version = v
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadMessage, err)
	}
	return r, nil
}

func decodeFetchResponse(b []byte) (*kmsg.FetchResponse, error) {
	v, body, err := messageVersion(b)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrFetchResponse()
	r.Version = v
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadMessage, err)
	}
	return r, nil
}

// splitBatches calls fn with each whole record batch in b, in order, and
// reports a trailing fragment (a leader never sends one; a fragment means
// the bytes are damaged) as an error.
func splitBatches(b []byte, fn func([]byte) error) error {
	for len(b) > 0 {
		if len(b) < 12 {
			return fmt.Errorf("%w: %d trailing bytes", errBadMessage, len(b))
		}
		n := int64(binary.BigEndian.Uint32(b[8:12])) + 12
		if n < 12+49 || n > int64(len(b)) {
			return fmt.Errorf("%w: batch of %d bytes in %d", errBadMessage, n, len(b))
		}
		if err := fn(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
