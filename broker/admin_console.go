package broker

import "net/http"

// adminRoot is what the admin port serves at /: Config.Console's handler
// (the web console), else the plain-text index.
func (n *Node) adminRoot() http.Handler {
	if n.cfg.Console != nil {
		return n.cfg.Console(n)
	}
	return http.HandlerFunc(n.serveIndex)
}
