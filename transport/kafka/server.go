package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/internal/logging"
)

// Server accepts Kafka client connections and serves them with a Handler.
type Server struct {
	cfg     Config
	handler Handler
	apis    apiTable
	obs     Observer
	log     *slog.Logger
	ln      net.Listener

	ctx    context.Context // cancelled by Close; parent of every Conn's
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the accept loop and every connection
	nextID atomic.Uint64

	mu       sync.Mutex // guards conns and draining
	conns    map[*Conn]struct{}
	draining bool

	closeOnce sync.Once
	testHooks testHooks
}

// testHooks lets in-package tests observe moments that cannot be awaited
// otherwise. Nil in production.
type testHooks struct {
	readerBlocked func(*Conn) // the reader waits for an in-flight slot
	idleWhileBusy func(*Conn) // the idle timeout passed with requests in flight
}

// Start validates cfg and h's API ranges, listens on cfg.Addr, and serves
// connections on its own goroutines until Close or Shutdown.
func Start(cfg Config, h Handler) (*Server, error) {
	return start(cfg, h, testHooks{})
}

func start(cfg Config, h Handler, hooks testHooks) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ranges := h.APIs()
	if cfg.SASL != nil {
		ranges = append(ranges, saslAPIs()...)
	}
	apis, err := newAPITable(ranges)
	if err != nil {
		return nil, err
	}
	listen := cfg.Listen
	if listen == nil {
		listen = net.Listen
	}
	ln, err := listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("kafka listen %s: %w", cfg.Addr, err)
	}
	s := newServer(cfg, h, apis, ln)
	s.testHooks = hooks
	s.log.Info("kafka listener started", "addr", ln.Addr().String())
	s.wg.Go(s.acceptLoop)
	return s, nil
}

func newServer(cfg Config, h Handler, apis apiTable, ln net.Listener) *Server {
	ctx, cancel := context.WithCancelCause(context.Background())
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	return &Server{
		cfg: cfg, handler: h, apis: apis, obs: obs, ln: ln,
		log: logging.Discard(cfg.Logger).With("listener", ln.Addr().String()),
		ctx: ctx, cancel: cancel, conns: map[*Conn]struct{}{},
	}
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// APIs returns the served ranges sorted by key, as checked by Start.
func (s *Server) APIs() []APIRange { return append([]APIRange(nil), s.apis.sorted...) }

func (s *Server) acceptLoop() {
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) {
	c := s.newConn(nc, s.nextID.Add(1))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || s.ctx.Err() != nil {
		nc.Close()
		c.cancel(ErrServerClosed)
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Go(func() {
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	})
}

// Shutdown stops accepting and reading, lets every connection write the
// responses to the requests it already read, and then closes. When ctx
// ends first it closes at once (as Close) and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for c := range s.conns {
		c.drain()
	}
	s.mu.Unlock()
	s.ln.Close()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close stops accepting, cancels every connection's context, closes the
// connections and waits for all the server's goroutines. Responses not
// yet written are dropped. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel(ErrServerClosed)
		s.ln.Close()
	})
	s.wg.Wait()
	return nil
}

// apiVersionsRejection is Kafka's answer to an ApiVersions version it does
// not serve: v0, UNSUPPORTED_VERSION, and ApiVersions' own range so the
// client retries with a version we serve (KIP-511).
func (s *Server) apiVersionsRejection() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	if r, ok := s.apis.get(apiVersionsKey); ok {
		resp.ApiKeys = APIKeys([]APIRange{r})
	}
	return resp
}
