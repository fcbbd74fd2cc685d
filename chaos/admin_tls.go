package chaos

import (
	"net/http"
	"time"
)

// The nodes' admin listeners may serve HTTPS (raftq server
// --admin-tls-*): Config.AdminTLS is then the client config HTTPClient
// uses, and AdminURL's scheme is https.

// newHTTPClient is the client HTTPClient returns: connections through
// DialContext, under Config.AdminTLS when set.
func (c *Cluster) newHTTPClient() *http.Client {
	tr := &http.Transport{DialContext: c.DialContext}
	if c.cfg.AdminTLS != nil {
		tr.TLSClientConfig = c.cfg.AdminTLS
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// AdminURL is path on node n's admin listener, https when
// Config.AdminTLS is set.
func (c *Cluster) AdminURL(n Node, path string) string {
	scheme := "http://"
	if c.cfg.AdminTLS != nil {
		scheme = "https://"
	}
	return scheme + n.AdminAddr() + path
}
