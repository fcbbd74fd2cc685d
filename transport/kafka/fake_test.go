package kafka

import (
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeHandler is an in-test fake of the broker: it answers ApiVersions,
// Metadata (itself as the only broker, every asked topic with one
// partition) and Produce (offset 0, no response for acks=0) at once.
// serve, when set, replaces the answers; seen records Serve calls in order.
type fakeHandler struct {
	apis  []APIRange
	addr  func() net.Addr
	serve func(c *Conn, req *Request) Pending

	mu   sync.Mutex
	seen []*Request
	conn []*Conn
}

// fakeAPIs are the ranges of DESIGN.md's compatibility notes for the
// APIs the fake answers.
func fakeAPIs() []APIRange {
	return []APIRange{
		{Key: 0, MinVersion: 3, MaxVersion: 13}, // Produce
		{Key: 3, MinVersion: 0, MaxVersion: 13}, // Metadata
		{Key: 18, MinVersion: 0, MaxVersion: 4}, // ApiVersions
		{Key: 2, MinVersion: 0, MaxVersion: 10}, // ListOffsets (never answered well)
	}
}

func newFake() *fakeHandler { return &fakeHandler{apis: fakeAPIs()} }

func (f *fakeHandler) APIs() []APIRange { return f.apis }

func (f *fakeHandler) Serve(c *Conn, req *Request) Pending {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.conn = append(f.conn, c)
	serve := f.serve
	f.mu.Unlock()
	if serve != nil {
		return serve(c, req)
	}
	return Ready(f.answer(req))
}

func (f *fakeHandler) requests() []*Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Request(nil), f.seen...)
}

func (f *fakeHandler) conns() []*Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Conn(nil), f.conn...)
}

// answer builds the fake's immediate response; nil means no response.
func (f *fakeHandler) answer(req *Request) kmsg.Response {
	switch body := req.Body.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = APIKeys(f.apis)
		return resp
	case *kmsg.MetadataRequest:
		return f.metadata(body)
	case *kmsg.ProduceRequest:
		if body.Acks == 0 {
			return nil
		}
		resp, _ := ErrorResponse(body, 0)
		return resp
	}
	resp, _ := ErrorResponse(req.Body, 0)
	return resp
}

func (f *fakeHandler) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = 0
	if f.addr != nil {
		host, port, _ := net.SplitHostPort(f.addr().String())
		p, _ := strconv.Atoi(port)
		b.Host, b.Port = host, int32(p)
	}
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = 0
	for _, rt := range req.Topics {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Leader, p.Replicas, p.ISR = 0, []int32{0}, []int32{0}
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
