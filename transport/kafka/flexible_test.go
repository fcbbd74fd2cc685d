package kafka

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeWithHeaderTags frames a flexible req with a header v2 carrying one
// tagged field, which kmsg's formatter never sends.
func encodeWithHeaderTags(req kmsg.Request, corr int32, tag uint32, val []byte) []byte {
	b := kbin.AppendInt16(nil, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, kmsg.StringPtr("tagger"))
	b = kbin.AppendUvarint(b, 1)
	b = kbin.AppendUvarint(b, tag)
	b = kbin.AppendUvarint(b, uint32(len(val)))
	b = append(b, val...)
	b = req.AppendTo(b)
	return frameOf(b)
}

func TestServer_FlexibleRequestHeaderAndResponseTags(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending {
		resp := f.answer(req)
		if m, ok := resp.(*kmsg.MetadataResponse); ok {
			m.UnknownTags.Set(5, []byte{1, 2, 3})
		}
		return Ready(resp)
	}
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())

	req := metadataReq(12, "flex")
	req.UnknownTags.Set(9, []byte("body-tag"))
	rc.write(encodeWithHeaderTags(req, 42, 3, []byte("hdr")))
	resp := rc.read(req, 42).(*kmsg.MetadataResponse)
	var tag []byte
	resp.UnknownTags.Each(func(k uint32, v []byte) {
		if k == 5 {
			tag = v
		}
	})
	if !bytes.Equal(tag, []byte{1, 2, 3}) {
		t.Fatalf("response tag 5 = %v, want [1 2 3]", tag)
	}

	got := f.requests()[0]
	var hdrTag, bodyTag []byte
	got.Header.Tags.Each(func(k uint32, v []byte) {
		if k == 3 {
			hdrTag = v
		}
	})
	got.Body.(*kmsg.MetadataRequest).UnknownTags.Each(func(k uint32, v []byte) {
		if k == 9 {
			bodyTag = v
		}
	})
	if string(hdrTag) != "hdr" || string(bodyTag) != "body-tag" {
		t.Fatalf("header tag %q, body tag %q; want hdr, body-tag", hdrTag, bodyTag)
	}
	if *got.Header.ClientID != "tagger" || *got.Body.(*kmsg.MetadataRequest).Topics[0].Topic != "flex" {
		t.Fatalf("decoded request %+v", got)
	}
}

// The response header is v1 (a tag byte after the correlation id) for
// flexible requests, v0 otherwise, and always v0 for ApiVersions even at
// its flexible versions.
func TestServer_ResponseHeaderVersions(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	rc := dialRaw(t, ts.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	cases := []struct {
		req     kmsg.Request
		tagByte bool
	}{
		{metadataReq(12, "a"), true},
		{metadataReq(8, "a"), false},
		{av, false},
	}
	for i, tc := range cases {
		rc.send(int32(i), tc.req)
		_, rest, err := rc.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := tc.req.ResponseKind()
		expected := fakeBody(tc.req)
		body := rest
		if tc.tagByte {
			if rest[0] != 0 {
				t.Fatalf("case %d: header tag section %#x, want empty (0)", i, rest[0])
			}
			body = rest[1:]
		}
		if err := want.ReadFrom(body); err != nil {
			t.Fatalf("case %d: body does not decode right after the header: %v", i, err)
		}
		if len(body) != len(expected) {
			t.Fatalf("case %d: body %d bytes, want %d", i, len(body), len(expected))
		}
	}
}

// fakeBody is the response body a fresh fake sends for req.
func fakeBody(req kmsg.Request) []byte {
	return newFake().answer(&Request{Body: req}).AppendTo(nil)
}
