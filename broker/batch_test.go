package broker

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// appendRecord appends r in the v2 record encoding (a varint length, then
// the body), as a producer would.
func appendRecord(dst []byte, r kmsg.Record) []byte {
	body := []byte{0} // attributes
	body = binary.AppendVarint(body, r.TimestampDelta64)
	body = binary.AppendVarint(body, int64(r.OffsetDelta))
	if r.Key == nil {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(r.Key)))
		body = append(body, r.Key...)
	}
	body = binary.AppendVarint(body, int64(len(r.Value)))
	body = append(body, r.Value...)
	body = binary.AppendVarint(body, 0) // no headers
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// encodeBatch encodes rb with a correct length and CRC-32C.
func encodeBatch(rb kmsg.RecordBatch) []byte {
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:21], crc)
	return b
}

// rawKafka sends one request on a fresh connection, bypassing kgo (which
// rewrites some fields, such as Produce acks), and decodes the response.
func rawKafka(t testing.TB, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, 1)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	body = body[4:] // correlation id
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty tagged fields of response header v1
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %T: %v", resp, err)
	}
	return resp
}
