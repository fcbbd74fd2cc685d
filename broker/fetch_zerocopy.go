package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// fetchResponse is a Fetch response whose record bytes stay in segment
// files until the connection's writer sends them: it is a
// kafka.BodyWriter. Everything but the record bytes is encoded by kmsg at
// the request's version; WriteBody interleaves those chunks with a
// positional sendfile of each partition's Range.
//
// The embedded FetchResponse holds empty record sets where the ranges go,
// so its own AppendTo would encode none of them: only WriteBody sends the
// records.
//
// Ranges are released exactly once: by WriteBody when it ends (written or
// failed), by take, or, if neither has started when the connection's
// context ends (the connection died or the server closed first), by the
// context.AfterFunc that seal arms. The connection's context always ends
// when the connection does, so no path keeps a segment file open.
type fetchResponse struct {
	*kmsg.FetchResponse

	ranges []fetchRange
	bytes  int // record bytes in ranges

	// Set by seal: chunks[k] is the encoding before ranges[k] (with its
	// length prefix), the last chunk what follows the last range.
	chunks  [][]byte
	bodyLen int
	stop    func() bool

	state atomic.Int32 // fetchIdle, fetchClaimed or fetchReleased
}

// fetchRange is the records of one partition of the response.
type fetchRange struct {
	topic, partition int // indexes into Topics and their Partitions
	r                *partition.Range
}

const (
	fetchIdle     = iota // nobody has the ranges yet
	fetchClaimed         // WriteBody or take has them and releases them
	fetchReleased        // released without being written
)

var (
	_ kafka.BodyWriter = (*fetchResponse)(nil)
	_ kmsg.Response    = (*fetchResponse)(nil)

	errFetchReleased = errors.New("broker: fetch response released before it was written")
)

// seal encodes the response around its ranges and ties their release to
// ctx, the connection's context. Call it once, on the response that is
// returned.
func (f *fetchResponse) seal(ctx context.Context) {
	f.chunks = spliceRecords(f.FetchResponse, f.ranges)
	f.bodyLen = 0
	for _, c := range f.chunks {
		f.bodyLen += len(c)
	}
	for _, fr := range f.ranges {
		f.bodyLen += int(fr.r.Size)
	}
	f.stop = context.AfterFunc(ctx, func() {
		if f.state.CompareAndSwap(fetchIdle, fetchReleased) {
			f.release()
		}
	})
}

// release releases every range; Range.Release is idempotent.
func (f *fetchResponse) release() {
	for _, fr := range f.ranges {
		fr.r.Release()
	}
}

// discard releases the ranges of a response that will not be sent.
func (f *fetchResponse) discard() {
	if f.state.CompareAndSwap(fetchIdle, fetchReleased) {
		f.release()
	}
}

// BodyLen is the length of the chunks plus the ranges' bytes: exactly
// what WriteBody writes.
func (f *fetchResponse) BodyLen() int { return f.bodyLen }

// WriteBody writes prefix with the first chunk (one writev), then each
// range, by sendfile when w is a socket, and the chunk after it. It
// releases the ranges when it returns.
func (f *fetchResponse) WriteBody(w io.Writer, prefix []byte) (int64, error) {
	if !f.claim() {
		return 0, errFetchReleased
	}
	defer f.done()
	bufs := net.Buffers{prefix, f.chunks[0]}
	n, err := bufs.WriteTo(w)
	for k := 0; err == nil && k < len(f.ranges); k++ {
		var m int64
		m, err = f.ranges[k].r.WriteTo(w)
		n += m
		if c := f.chunks[k+1]; err == nil && len(c) > 0 {
			var m int
			m, err = w.Write(c)
			n += int64(m)
		}
	}
	return n, err
}

// take hands the ranges to the caller, who must release them, or returns
// false if they are already released. The response must not be written
// afterwards.
func (f *fetchResponse) take() ([]fetchRange, bool) {
	if !f.claim() {
		return nil, false
	}
	f.stopWatch()
	return f.ranges, true
}

func (f *fetchResponse) claim() bool { return f.state.CompareAndSwap(fetchIdle, fetchClaimed) }

func (f *fetchResponse) done() {
	f.stopWatch()
	f.release()
}

func (f *fetchResponse) stopWatch() {
	if f.stop != nil {
		f.stop()
	}
}

// spliceRecords returns resp's encoding cut around the record sets of
// ranges, each cut carrying that range's length prefix. kmsg encodes the
// response twice: with every range's record set empty, and with each one
// byte long. The encodings agree except at those record sets, where the
// second has a length one higher (its last byte differs first) and one
// extra byte, so a single walk over both finds every length prefix
// without re-implementing kmsg's layout. Record sets are nullable bytes:
// int32 length before flexible versions, compact (uvarint length+1)
// from them.
func spliceRecords(resp *kmsg.FetchResponse, ranges []fetchRange) [][]byte {
	if len(ranges) == 0 {
		return [][]byte{resp.AppendTo(nil)}
	}
	set := func(b []byte) {
		for _, fr := range ranges {
			resp.Topics[fr.topic].Partitions[fr.partition].RecordBatches = b
		}
	}
	set([]byte{0})
	one := resp.AppendTo(nil)
	set([]byte{})
	empty := resp.AppendTo(nil)
	flexible := resp.IsFlexible()
	chunks := make([][]byte, 0, len(ranges)+1)
	from := 0 // start of the next chunk in empty
	for k, fr := range ranges {
		d := firstDifference(empty[from:], one[from+k:]) + from
		prefix := 1
		if !flexible {
			prefix = 4
		}
		start := d + 1 - prefix
		if start < from || !bytes.Equal(empty[start:d+1], emptyPrefix(flexible)) {
			panic(fmt.Sprintf("broker: kmsg fetch v%d encoding: no empty record set at %d", resp.Version, d))
		}
		c := append([]byte(nil), empty[from:start]...)
		chunks = append(chunks, appendBytesLen(c, fr.r.Size, flexible))
		from = d + 1
	}
	if tail := empty[from:]; !bytes.Equal(tail, one[from+len(ranges):]) {
		panic(fmt.Sprintf("broker: kmsg fetch v%d encoding: encodings differ after the record sets", resp.Version))
	}
	return append(chunks, empty[from:])
}

// firstDifference is the first index where a and b differ.
func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func emptyPrefix(flexible bool) []byte {
	return appendBytesLen(nil, 0, flexible)
}

// appendBytesLen appends the length prefix of a byte string of n bytes,
// compact in flexible versions (Kafka's unsigned varint is Go's).
func appendBytesLen(dst []byte, n int64, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
