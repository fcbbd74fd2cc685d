package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed assets templates
var embedded embed.FS

// Config configures a Console.
type Config struct {
	// Addrs returns this node's Kafka and admin addresses; it is called
	// per request, so a node may bind its listeners after New.
	Addrs func() (kafka, admin string)
	// ReportsDir, if set, is a directory of `raftq jepsen run` reports
	// (one subdirectory per run) to list and serve under /reports/.
	ReportsDir string
	// SampleInterval is how often the sampler reads this node's status
	// and metrics; Samples is how many it keeps (the sparklines' length).
	SampleInterval time.Duration
	Samples        int
	// IdleStop stops the sampler when no page was asked for this long.
	IdleStop time.Duration
	// NodeTimeout bounds each request to a node or to the Kafka API.
	NodeTimeout time.Duration
	// Records is how many of a partition's last records its page shows.
	Records int
	// Version names this build; empty reads the binary's build info.
	Version string
	// AdminTLS, if set, is the client config of the requests to nodes'
	// admin listeners, which then serve HTTPS; nil is plain HTTP.
	AdminTLS *tls.Config
	Logger   *slog.Logger
}

// DefaultConfig returns a Config with every field but Addrs set.
func DefaultConfig() Config {
	return Config{SampleInterval: 2 * time.Second, Samples: 60, IdleStop: 10 * time.Minute, NodeTimeout: 2 * time.Second, Records: 20}
}

// Validate reports a Config that New cannot use.
func (c Config) Validate() error {
	switch {
	case c.Addrs == nil:
		return errors.New("console: no Addrs")
	case c.SampleInterval <= 0 || c.Samples < 2:
		return fmt.Errorf("console: sample interval %s and %d samples: want a positive interval and at least 2", c.SampleInterval, c.Samples)
	case c.NodeTimeout <= 0 || c.Records <= 0:
		return fmt.Errorf("console: node timeout %s and %d records: want both positive", c.NodeTimeout, c.Records)
	}
	return nil
}

// Console serves the web console. It is an http.Handler.
type Console struct {
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux
	tmpl *template.Template
	http *http.Client

	mu        sync.Mutex // a leaf
	samples   []sample   // oldest first, at most cfg.Samples
	sampling  bool
	lastAsked time.Time
	stop      chan struct{}
	closed    bool
}

var _ http.Handler = (*Console)(nil)

// New returns a Console.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = buildVersion()
	}
	c := &Console{cfg: cfg, log: cfg.Logger, http: &http.Client{Timeout: cfg.NodeTimeout}, stop: make(chan struct{})}
	if cfg.AdminTLS != nil {
		c.http.Transport = &http.Transport{TLSClientConfig: cfg.AdminTLS}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	t, err := template.New("").Funcs(funcs).ParseFS(embedded, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c.tmpl = t
	assets, _ := fs.Sub(embedded, "assets")
	m := http.NewServeMux()
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	m.HandleFunc("GET /{$}", c.serveOverview)
	m.HandleFunc("GET /topics/{topic}", c.serveTopic)
	m.HandleFunc("GET /topics/{topic}/{partition}", c.servePartition)
	m.HandleFunc("GET /groups/{group}", c.serveGroup)
	m.HandleFunc("GET /console/version", c.serveVersion)
	m.HandleFunc("GET /reports/{$}", c.serveReports)
	m.Handle("GET /reports/", c.reportFiles())
	c.mux = m
	return c, nil
}

// ServeHTTP serves the console's pages, assets and report files.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.asked()
	c.mux.ServeHTTP(w, r)
}

// Close stops the sampler for good; the console still serves pages.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.stop)
}

// page is what every template gets.
type page struct {
	Title    string
	Self     string // this node's admin address
	Version  string
	Now      time.Time
	Fragment bool // render only the live part
	Reports  bool // a reports dir is configured
	Data     any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	_, admin := c.cfg.Addrs()
	p := page{Title: title, Self: admin, Version: c.cfg.Version, Now: time.Now(), Fragment: r.URL.Query().Get("fragment") == "1",
		Reports: c.cfg.ReportsDir != "", Data: data}
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.log.Warn("console template", "page", name, "err", err)
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
}

// ctx bounds one page's requests to nodes and Kafka.
func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 2*c.cfg.NodeTimeout)
}
