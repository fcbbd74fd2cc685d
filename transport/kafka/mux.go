package kafka

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ServeFunc serves one API; it has Handler.Serve's contract.
type ServeFunc func(c *Conn, req *Request) Pending

// Mux is a Handler that routes each API key to its own ServeFunc, so the
// broker can keep one file per API. Register every route before Start;
// a Mux is not safe to change while serving.
type Mux struct {
	routes map[int16]muxRoute
}

type muxRoute struct {
	r  APIRange
	fn ServeFunc
}

var _ Handler = (*Mux)(nil)

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{routes: map[int16]muxRoute{}} }

// Handle routes r.Key, at versions r.MinVersion to r.MaxVersion, to fn.
// It panics on a second route for one key: a wiring bug.
func (m *Mux) Handle(r APIRange, fn ServeFunc) {
	if _, dup := m.routes[r.Key]; dup {
		panic(fmt.Sprintf("kafka: two routes for %s (key %d)", kmsg.NameForKey(r.Key), r.Key))
	}
	m.routes[r.Key] = muxRoute{r: r, fn: fn}
}

// APIs lists the routes' ranges, sorted by key.
func (m *Mux) APIs() []APIRange {
	out := make([]APIRange, 0, len(m.routes))
	for _, rt := range m.routes {
		out = append(out, rt.r)
	}
	slices.SortFunc(out, func(a, b APIRange) int { return int(a.Key) - int(b.Key) })
	return out
}

// Serve calls the route of req's key. The server only admits keys and
// versions from APIs, so a missing route is a broken invariant and fails
// the connection.
func (m *Mux) Serve(c *Conn, req *Request) Pending {
	rt, ok := m.routes[req.Header.Key]
	if !ok {
		return Fail(fmt.Errorf("kafka mux: no route for api key %d", req.Header.Key))
	}
	return rt.fn(c, req)
}
