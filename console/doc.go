// Package console is the web console every raftq node serves at / on its
// admin port: the cluster's nodes and their liveness, the metadata group's
// leader and term, each node's version, topics with their partitions'
// leaders, epochs, replicas and lag, high watermarks, log starts, sizes and
// produce and fetch rates, consumer groups with their members and lag, the
// last records of a partition, and the reports of `raftq jepsen` runs.
//
// It reads what a user could read: every node's /v1/status and /metrics
// over HTTP (the broker list in this node's status names their admin
// addresses) and the Kafka APIs through franz-go. It imports nothing of
// the broker but its status document's types, so it shows a cluster as
// its nodes report it, nodes it cannot reach as unknown.
//
// Every page is rendered on the server with html/template, so it reads
// without JavaScript; assets/console.js refreshes the live part of a page
// in place by fetching the same page's fragment (?fragment=1) every few
// seconds. Everything it serves is embedded: no CDN, no external font.
//
// Goroutines: the sampler, started by the first request and stopped after
// IdleStop without one (or by Close), owns the ring of this node's
// samples behind Console.mu, from which the rates and sparklines come.
// Console.mu is a leaf; no lock is held across a request to a node.
package console
