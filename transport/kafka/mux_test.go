package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMux_RoutesByKeyAndAdvertises(t *testing.T) {
	m := NewMux()
	fake := newFake()
	var metaCalls int
	m.Handle(APIRange{Key: 18, MinVersion: 0, MaxVersion: 4}, func(c *Conn, req *Request) Pending {
		resp := req.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = APIKeys(m.APIs())
		return Ready(resp)
	})
	m.Handle(APIRange{Key: 3, MinVersion: 0, MaxVersion: 13}, func(c *Conn, req *Request) Pending {
		metaCalls++ // reader goroutine only: one connection
		return Ready(fake.answer(req))
	})
	ts := startServer(t, m, nil)
	rc := dialRaw(t, ts.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	rc.send(1, av, metadataReq(12, "a"))
	keys := rc.read(av, 1).(*kmsg.ApiVersionsResponse).ApiKeys
	if len(keys) != 2 || keys[0].ApiKey != 3 || keys[1].ApiKey != 18 {
		t.Fatalf("advertised %+v, want Metadata and ApiVersions", keys)
	}
	rc.read(metadataReq(12, "a"), 2)
	rc.ping(3)
	eventually(t, "metadata routed", func() bool { return ts.obs.Snapshot().Requests[3] == 1 })
	if metaCalls != 1 {
		t.Fatalf("metadata route called %d times, want 1", metaCalls)
	}
}

func TestMux_DuplicateRoutePanics(t *testing.T) {
	m := NewMux()
	m.Handle(APIRange{Key: 3, MaxVersion: 1}, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("second route for a key did not panic")
		}
	}()
	m.Handle(APIRange{Key: 3, MaxVersion: 2}, nil)
}
