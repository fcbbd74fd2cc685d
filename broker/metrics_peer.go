package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The peer transport's connection figures, read from its Stats at
// scrape time, and the admin listener's refused TLS handshakes.

var (
	peerConnectsDesc = prometheus.NewDesc("raftq_peer_connects_total",
		"Raft streams established with peers.", nil, nil)
	peerDialErrorsDesc = prometheus.NewDesc("raftq_peer_dial_errors_total",
		"Failed dials and handshakes of raft streams to peers.", nil, nil)
	peerRefusedDesc = prometheus.NewDesc("raftq_peer_handshakes_refused_total",
		"Peer connections refused, by direction (inbound: this node refused them; outbound: a peer refused this node, or this node its certificate) "+
			"and stage (tls: at the TLS handshake, before any peer hello: no certificate, one not from the cluster's CA, expired, not TLS at all; "+
			"hello: by the peer handshake: another cluster, an unknown or duplicate node id, ...).",
		[]string{"direction", "stage"}, nil)
	peerConnectedDesc = prometheus.NewDesc("raftq_peer_connected",
		"Whether the raft stream with each peer is up (1) or not (0).", []string{"peer"}, nil)
)

func newAdminTLSRefused() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "raftq_admin_tls_handshakes_refused_total",
		Help: "TLS handshakes the admin listener refused or that failed: a client without a certificate from the admin CA when one is required, garbage, a client that hung up (plain HTTP is answered 400, not counted).",
	})
}

// peerCollector reports the peer transport's counters.
type peerCollector struct{ n *Node }

func (c peerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{peerConnectsDesc, peerDialErrorsDesc, peerRefusedDesc, peerConnectedDesc} {
		ch <- d
	}
}

func (c peerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.peer == nil {
		return
	}
	st := c.n.peer.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(peerConnectsDesc, st.Connects)
	counter(peerDialErrorsDesc, st.DialErrors)
	counter(peerRefusedDesc, st.TLSRefusedInbound, "inbound", "tls")
	counter(peerRefusedDesc, st.RefusedInbound, "inbound", "hello")
	counter(peerRefusedDesc, st.TLSFailedOutbound, "outbound", "tls")
	counter(peerRefusedDesc, st.RefusedOutbound, "outbound", "hello")
	for id, p := range st.Peers {
		ch <- prometheus.MustNewConstMetric(peerConnectedDesc, prometheus.GaugeValue, b2f(p.Connected), strconv.FormatUint(id, 10))
	}
}
