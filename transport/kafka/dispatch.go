package kafka

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// item is one request on its way from the reader to the writer.
type item struct {
	key, version int16
	respVersion  int16 // the version the response must have
	corr         int32
	flexible     bool    // response header v1
	raw          bool    // a bare SASL token, written without a header
	outcome      Outcome // reported when the response is written
	pending      Pending
	received     time.Time
}

// dispatch decodes frame and either starts it on the handler or answers
// it with an error the server builds. An error closes the connection.
func (c *Conn) dispatch(frame []byte, received time.Time) (item, error) {
	if c.sasl.v0 {
		return c.rawToken(frame, received)
	}
	h, req, body, err := decodeHeader(frame)
	if err != nil {
		return item{}, err
	}
	c.noteClientID(h.ClientID)
	it := item{key: h.Key, version: h.Version, respVersion: h.Version, corr: h.CorrelationID, received: received}
	if _, ok := c.srv.apis.lookup(h.Key, h.Version); !ok {
		return c.reject(it, h, req, body)
	}
	if err := decodeBody(h, req, body); err != nil {
		return item{}, err
	}
	c.noteSoftware(req)
	it.flexible = responseHeaderFlexible(h, req)
	if c.srv.cfg.SASL != nil {
		it, handled, err := c.gate(it, h, req)
		if err != nil || handled {
			return it, err
		}
	}
	it.pending = c.start(&Request{Header: h, Body: req, Size: len(frame), Received: received})
	return it, nil
}

// reject answers a request the handler does not serve. ApiVersions gets
// Kafka's v0 UNSUPPORTED_VERSION answer with the range to retry in; other
// requests get ErrorResponse with UNSUPPORTED_VERSION when kmsg can decode
// them and the response can carry it, and close the connection otherwise.
func (c *Conn) reject(it item, h Header, req kmsg.Request, body []byte) (item, error) {
	it.outcome = OutcomeRejected
	if h.Key == apiVersionsKey {
		it.respVersion = 0
		it.pending = Ready(c.srv.apiVersionsRejection())
		return it, nil
	}
	unsupported := &UnsupportedError{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID}
	if h.Version > req.MaxVersion() {
		return item{}, unsupported
	}
	if err := decodeBody(h, req, body); err != nil {
		return item{}, err
	}
	resp, ok := ErrorResponse(req, kerr.UnsupportedVersion.Code)
	if !ok {
		return item{}, unsupported
	}
	c.log.Debug("unsupported request answered with an error", "api", kmsg.NameForKey(h.Key), "version", h.Version)
	it.flexible = responseHeaderFlexible(h, req)
	it.pending = Ready(resp)
	return it, nil
}

// start calls the handler, turning a panic or a nil Pending into a failure
// of this connection alone.
func (c *Conn) start(req *Request) (p Pending) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "api", kmsg.NameForKey(req.Header.Key), "version", req.Header.Version,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p = Fail(fmt.Errorf("%w: %s v%d: %v", ErrHandlerPanic, kmsg.NameForKey(req.Header.Key), req.Header.Version, r))
		}
	}()
	if p = c.srv.handler.Serve(c, req); p == nil {
		p = Fail(fmt.Errorf("%w: nil Pending for %s v%d", ErrBadResponse, kmsg.NameForKey(req.Header.Key), req.Header.Version))
	}
	return p
}

func (c *Conn) noteClientID(id *string) {
	if id == nil {
		id = new(string)
	}
	if cur := c.clientID.Load(); cur == nil || *cur != *id {
		c.clientID.Store(id)
	}
}

func (c *Conn) noteSoftware(req kmsg.Request) {
	av, ok := req.(*kmsg.ApiVersionsRequest)
	if !ok || av.Version < 3 {
		return
	}
	c.software.Store(&ClientSoftware{Name: av.ClientSoftwareName, Version: av.ClientSoftwareVersion})
}
