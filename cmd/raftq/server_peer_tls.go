package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// nodeTLSFlags are the TLS flags between nodes: mutual TLS on the peer
// port (--peer-tls-*) and TLS on the admin listener (--admin-tls-*).
// The node reloads the files on change or SIGHUP (broker/node_tls.go).
type nodeTLSFlags struct {
	adminClientAuth string
}

func bindNodeTLSFlags(fs *pflag.FlagSet, c *broker.Config) *nodeTLSFlags {
	f := &nodeTLSFlags{}
	fs.StringVar(&c.PeerTLS.Cert, "peer-tls-cert-file", "", "PEM certificate this node presents to its peers; with --peer-tls-key-file and --peer-tls-ca-file, every peer connection is mutual TLS")
	fs.StringVar(&c.PeerTLS.Key, "peer-tls-key-file", "", "PEM key of --peer-tls-cert-file")
	fs.StringVar(&c.PeerTLS.CA, "peer-tls-ca-file", "", "PEM bundle of the cluster's CA: a peer whose certificate does not chain to it is refused at the TLS handshake")
	fs.StringVar(&c.PeerTLSNodeName, "peer-tls-node-name", "", "name node N's peer certificate must carry (common name or DNS name), %d standing for N, e.g. node-%d.raftq: a certificate then stands for its own node only (default: any certificate of the CA for any node)")
	fs.StringVar(&c.AdminTLS.Cert, "admin-tls-cert-file", "", "PEM certificate of the admin HTTP listener; with it and --admin-tls-key-file the listener serves HTTPS")
	fs.StringVar(&c.AdminTLS.Key, "admin-tls-key-file", "", "PEM key of --admin-tls-cert-file")
	fs.StringVar(&c.AdminTLS.CA, "admin-tls-ca-file", "", "PEM CA bundle that admin clients' certificates must chain to (with --admin-tls-client-auth required), and that other nodes' admin listeners are verified against")
	fs.StringVar(&f.adminClientAuth, "admin-tls-client-auth", "none", "none or required: whether admin clients must present a certificate from --admin-tls-ca-file")
	return f
}

// apply checks the flags together and sets what they imply.
func (f *nodeTLSFlags) apply(c *broker.Config) error {
	p := c.PeerTLS
	if !p.Empty() && (p.Cert == "" || p.Key == "" || p.CA == "") {
		return usageError{fmt.Errorf("peer TLS needs all of --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file (got %q, %q, %q)", p.Cert, p.Key, p.CA)}
	}
	if c.PeerTLSNodeName != "" && (p.Empty() || strings.Count(c.PeerTLSNodeName, "%") != 1 || !strings.Contains(c.PeerTLSNodeName, "%d")) {
		return usageError{fmt.Errorf("--peer-tls-node-name %q: want one %%d standing for the node id, with the --peer-tls-* files", c.PeerTLSNodeName)}
	}
	a := c.AdminTLS
	if (a.Cert == "") != (a.Key == "") {
		return usageError{fmt.Errorf("--admin-tls-cert-file %q and --admin-tls-key-file %q must be given together", a.Cert, a.Key)}
	}
	if a.Cert == "" && a.CA != "" {
		return usageError{fmt.Errorf("--admin-tls-ca-file %q without --admin-tls-cert-file and --admin-tls-key-file", a.CA)}
	}
	switch f.adminClientAuth {
	case "none":
		c.AdminRequireClientCert = false
	case "required":
		if a.CA == "" {
			return usageError{fmt.Errorf("--admin-tls-client-auth required needs --admin-tls-ca-file (and the admin certificate and key) to verify clients against")}
		}
		c.AdminRequireClientCert = true
	default:
		return usageError{fmt.Errorf("--admin-tls-client-auth %q: want none or required", f.adminClientAuth)}
	}
	return nil
}
