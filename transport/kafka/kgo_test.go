package kafka

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newKgo(t *testing.T, addr net.Addr) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr.String()), kgo.ClientID("kgo-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestServer_KgoApiVersionsAndMetadata(t *testing.T) {
	f := newFake()
	ts := startServer(t, f, nil)
	f.addr = ts.Addr
	cl := newKgo(t, ts.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	req := metadataReq(kmsg.NewPtrMetadataRequest().MaxVersion(), "orders")
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "127.0.0.1" {
		t.Fatalf("brokers = %+v, want the fake server", resp.Brokers)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "orders" {
		t.Fatalf("topics = %+v, want orders", resp.Topics)
	}

	var sawAV, sawMeta bool
	for _, r := range f.requests() {
		switch body := r.Body.(type) {
		case *kmsg.ApiVersionsRequest:
			sawAV = true
			if got, want := body.ClientSoftwareName, "kgo"; got != want {
				t.Errorf("software name %q, want %q", got, want)
			}
		case *kmsg.MetadataRequest:
			sawMeta = true
			if !body.IsFlexible() {
				t.Errorf("kgo sent Metadata v%d, want a flexible version", body.Version)
			}
			if r.Header.ClientID == nil || *r.Header.ClientID != "kgo-test" {
				t.Errorf("client id %v, want kgo-test", r.Header.ClientID)
			}
		}
	}
	if !sawAV || !sawMeta {
		t.Fatalf("handler saw ApiVersions %v, Metadata %v; want both", sawAV, sawMeta)
	}
	c := f.conns()[0]
	if got := c.ClientSoftware().Name; got != "kgo" {
		t.Errorf("Conn.ClientSoftware().Name = %q, want kgo", got)
	}
	if got := c.ClientID(); got != "kgo-test" {
		t.Errorf("Conn.ClientID() = %q, want kgo-test", got)
	}
}

// A body tagged field set by the handler reaches kgo, which proves the
// flexible response header and body are framed right.
func TestServer_KgoFlexibleTaggedFields(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending {
		resp := f.answer(req)
		if m, ok := resp.(*kmsg.MetadataResponse); ok {
			m.UnknownTags.Set(77, []byte("raftq"))
		}
		return Ready(resp)
	}
	ts := startServer(t, f, nil)
	f.addr = ts.Addr
	cl := newKgo(t, ts.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	kresp, err := cl.Request(ctx, metadataReq(12, "a"))
	if err != nil {
		t.Fatalf("metadata v12: %v", err)
	}
	var got []byte
	kresp.(*kmsg.MetadataResponse).UnknownTags.Each(func(k uint32, v []byte) {
		if k == 77 {
			got = v
		}
	})
	if string(got) != "raftq" {
		t.Fatalf("tag 77 = %q, want raftq", got)
	}
}

// kgo asks ApiVersions at its newest version; a server that serves less
// answers v0 UNSUPPORTED_VERSION with its range and kgo retries inside it.
func TestServer_KgoApiVersionsDowngrade(t *testing.T) {
	f := newFake()
	f.apis = []APIRange{{Key: 18, MinVersion: 0, MaxVersion: 2}, {Key: 3, MinVersion: 0, MaxVersion: 13}}
	ts := startServer(t, f, nil)
	f.addr = ts.Addr
	cl := newKgo(t, ts.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	if _, err := cl.Request(ctx, metadataReq(9, "a")); err != nil {
		t.Fatalf("metadata after downgrade: %v", err)
	}
	if got := ts.obs.Snapshot().Outcomes[OutcomeRejected]; got == 0 {
		t.Fatal("no ApiVersions was rejected; kgo did not ask above v2?")
	}
	for _, r := range f.requests() {
		if r.Header.Key == apiVersionsKey && r.Header.Version != 2 {
			t.Errorf("handler got ApiVersions v%d, want only v2", r.Header.Version)
		}
	}
}
