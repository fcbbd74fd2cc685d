package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// Each bad input closes its own connection, with the expected reason,
// while a connection opened before it and one opened after keep working.
func TestServer_BadFramesCloseOnlyThatConnection(t *testing.T) {
	const maxFrame = 1 << 20
	validProduce := encodeRequest(produceReq(9, 1, "a"), 7)
	cases := []struct {
		name  string
		bytes []byte
		half  bool // close the write side after sending
		want  error
	}{
		{"garbage", bytes.Repeat([]byte{0x5a}, 64), true, ErrFrameTooLarge},
		{"garbage frame", frameOf(bytes.Repeat([]byte{0xff}, 20)), false, ErrMalformed},
		{"unknown key", frameOf([]byte{0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}), false, ErrUnknownKey},
		{"truncated frame", binary.BigEndian.AppendUint32(nil, 100), true, ErrTruncated},
		{"truncated body", validProduce[:len(validProduce)-5], true, ErrTruncated},
		{"truncated size", []byte{0, 0}, true, ErrTruncated},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xf0}, false, ErrMalformed},
		{"oversized length", binary.BigEndian.AppendUint32(nil, maxFrame+1), false, ErrFrameTooLarge},
		{"max int length", []byte{0x7f, 0xff, 0xff, 0xff}, false, ErrFrameTooLarge},
		{"too short for a header", frameOf([]byte{0, 3, 0}), false, ErrMalformed},
		{"zero length", []byte{0, 0, 0, 0}, false, ErrMalformed},
		{"negative version", frameOf([]byte{0, 3, 0xff, 0xfe, 0, 0, 0, 1, 0, 0}), false, ErrMalformed},
		{"bad client id length", frameOf([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0}), false, ErrMalformed},
		{"malformed body", malformedBody(validProduce), false, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, newFake(), func(c *Config) { c.MaxFrameBytes = maxFrame })
			good := dialRaw(t, ts.Addr())
			good.ping(1)

			bad := dialRaw(t, ts.Addr())
			bad.write(tc.bytes)
			if tc.half {
				bad.conn.CloseWrite()
			}
			bad.expectClosed()
			eventually(t, "bad connection closed with a reason", func() bool { return ts.obs.anyClosedWith(tc.want) })
			if got := ts.obs.closedReasons(); len(got) != 1 {
				t.Fatalf("closed connections' reasons %v, want exactly the bad one", got)
			}

			good.ping(2)
			dialRaw(t, ts.Addr()).ping(1)
			if errors.Is(tc.want, ErrFrameTooLarge) && !strings.Contains(ts.logs.String(), "frame too large") {
				t.Errorf("no log line for the oversized frame; log:\n%s", ts.logs.String())
			}
		})
	}
}

// malformedBody keeps frame's header and size but corrupts the body: the
// topic array claims more entries than the frame can hold.
func malformedBody(frame []byte) []byte {
	out := append([]byte(nil), frame...)
	// size(4) key(2) version(2) corr(4) clientID(2+4 "test") tags(1) =
	// 19; then Produce v9: transactional id (1), acks (2), timeout (4),
	// topics compact array length.
	out[19+1+2+4] = 0x7f
	return out
}

func TestServer_UnknownKeyClosesConnection(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	rc := dialRaw(t, ts.Addr())
	rc.ping(1)
	rc.write(frameOf([]byte{0x03, 0xe7, 0, 0, 0, 0, 0, 2, 0, 0}))
	rc.expectClosed()
	eventually(t, "closed as unknown key", func() bool { return ts.obs.anyClosedWith(ErrUnknownKey) })
}

// A served key at an unserved version gets UNSUPPORTED_VERSION in every
// per-partition error, and the connection carries on.
func TestServer_UnsupportedVersionGetsErrorResponse(t *testing.T) {
	f := newFake()
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())

	old := produceReq(2, 1, "a", "b") // served range is 3-13
	rc.send(1, old)
	resp := rc.read(old, 1).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics in the error response, want 2", len(resp.Topics))
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Errorf("%s/%d error %d, want UNSUPPORTED_VERSION", tp.Topic, p.Partition, p.ErrorCode)
			}
		}
	}

	// A key kmsg knows but the handler does not serve at all.
	dc := kmsg.NewPtrDescribeClusterRequest()
	rc.send(2, dc)
	if got := rc.read(dc, 2).(*kmsg.DescribeClusterResponse).ErrorCode; got != kerr.UnsupportedVersion.Code {
		t.Fatalf("DescribeCluster error %d, want UNSUPPORTED_VERSION", got)
	}
	rc.ping(3)
	if len(f.requests()) != 1 {
		t.Fatalf("handler saw %d requests, want only the ping", len(f.requests()))
	}
}

// ApiVersions at a version not served is answered like Kafka does: v0,
// UNSUPPORTED_VERSION, and the ApiVersions range — also for versions kmsg
// itself does not know.
func TestServer_ApiVersionsUnsupportedVersion(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, v := range []int16{5, 99} {
		rc := dialRaw(t, ts.Addr())
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		rc.send(9, req)
		v0 := kmsg.NewPtrApiVersionsRequest() // the answer is v0
		resp := rc.read(v0, 9).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want UNSUPPORTED_VERSION", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 4 {
			t.Fatalf("v%d: ApiKeys %+v, want only ApiVersions 0-4", v, resp.ApiKeys)
		}
		rc.ping(10)
	}
}

// Versions kmsg cannot decode, and requests whose response has no error
// field, close the connection: no clean error exists for them.
func TestServer_UnansweredUnsupportedCloses(t *testing.T) {
	f := newFake()
	f.apis = []APIRange{{Key: 18, MinVersion: 0, MaxVersion: 4}, {Key: 3, MinVersion: 1, MaxVersion: 13}}
	ts := startServer(t, f, nil)

	withTopic := metadataReq(0, "a")
	rc := dialRaw(t, ts.Addr())
	rc.send(1, withTopic)
	resp := rc.read(withTopic, 1).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("metadata v0 for a topic: %+v, want the topic with UNSUPPORTED_VERSION", resp.Topics)
	}

	for _, req := range []kmsg.Request{metadataReq(0), metadataReq(99, "a")} {
		rc := dialRaw(t, ts.Addr())
		rc.send(1, req)
		rc.expectClosed()
	}
	eventually(t, "two connections closed as unsupported", func() bool {
		n := 0
		for _, e := range ts.obs.closedReasons() {
			if errors.Is(e, ErrUnsupportedVersion) {
				n++
			}
		}
		return n == 2
	})
}

// The handler can fail a request: earlier responses are still written,
// then the connection closes. Panics and mismatched responses are
// contained the same way.
func TestServer_HandlerFailuresCloseOnlyThatConnection(t *testing.T) {
	cases := []struct {
		name  string
		serve func(f *fakeHandler, req *Request) Pending
		want  error
	}{
		{"fail", func(*fakeHandler, *Request) Pending { return Fail(errors.New("raft stopped")) }, nil},
		{"panic", func(*fakeHandler, *Request) Pending { panic("boom") }, ErrHandlerPanic},
		{"nil pending", func(*fakeHandler, *Request) Pending { return nil }, ErrBadResponse},
		{"wrong version", func(f *fakeHandler, req *Request) Pending {
			resp := f.answer(req)
			resp.SetVersion(req.Header.Version - 1)
			return Ready(resp)
		}, ErrBadResponse},
		{"wrong key", func(*fakeHandler, *Request) Pending { return Ready(kmsg.NewPtrFetchResponse()) }, ErrBadResponse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.serve = func(c *Conn, req *Request) Pending {
				if req.Header.CorrelationID == 2 {
					return tc.serve(f, req)
				}
				return Ready(f.answer(req))
			}
			ts := startServer(t, f, nil)
			other := dialRaw(t, ts.Addr())
			other.ping(1)

			rc := dialRaw(t, ts.Addr())
			first, second := metadataReq(12, "a"), metadataReq(12, "b")
			rc.send(1, first, second)
			rc.read(first, 1)
			rc.expectClosed()
			eventually(t, "connection closed", func() bool { return len(ts.obs.closedReasons()) == 1 })
			if reason := ts.obs.closedReasons()[0]; reason == nil || (tc.want != nil && !errors.Is(reason, tc.want)) {
				t.Fatalf("close reason %v, want %v", reason, tc.want)
			}
			other.ping(3)
		})
	}
}
