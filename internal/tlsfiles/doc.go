// Package tlsfiles serves TLS from PEM files that may change while a node
// runs: a certificate and key, and the CA bundle that peers' certificates
// must chain to. It is what the Kafka listeners, the peer transport and
// the admin listener share.
//
// Invariants:
//   - A Store always holds a certificate and key that parsed and matched;
//     a reload that fails (a missing, half-written or mismatched file)
//     keeps the old pair and reports the error. Nothing is ever served
//     from a partial reload.
//   - Every handshake reads the Store's current pair and CA pool, so a
//     reload takes effect on the next connection without a restart;
//     connections already open keep what they negotiated.
//   - With a CA bundle, a config that requires client certificates
//     refuses any certificate that does not chain to it before the
//     handshake completes; a client config verifies the server against
//     the same bundle.
//
// The CA type makes throwaway certificate authorities and certificates
// for `raftq dev --tls` and for tests; it is not a production PKI.
package tlsfiles
