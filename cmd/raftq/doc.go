// Command raftq runs raftq nodes and talks to raftq clusters.
//
//	raftq dev                      a 3-node cluster on loopback
//	raftq server --node-id 1 ...   one node
//	raftq server --seeds H:P ...   one node joining a running cluster (seeds: peer addresses)
//	raftq topic create|list|describe|delete
//	raftq produce TOPIC            stdin lines, or generated load with --rate
//	raftq consume TOPIC            from the beginning, an offset or the end
//	raftq cluster status           nodes, leaders, terms, lag
//	raftq bench                    produce throughput and latency
//	raftq group list|describe|reset-offsets   consumer groups
//	raftq user create|delete|list  SASL/SCRAM users
//	raftq acl add|list|remove      Kafka ACLs (kafka-acls.sh's flags), for servers run with --authorizer
//	raftq jepsen run               a checked run of a local cluster under faults
//	raftq jepsen check DIR         check a saved run's history again
//
// Run "raftq COMMAND --help" for a command's flags.
//
// raftq server --peer-tls-* requires mutual TLS between nodes and
// --admin-tls-* serves the admin API over HTTPS (server_peer_tls.go); the
// commands that call the admin API take the client side of the
// --admin-tls-* flags, or $RAFTQ_ADMIN_TLS_* (client_admin.go).
//
// Ctrl-C or SIGTERM asks a command to wind up: a server node first hands
// the leadership of its partitions and of the metadata group to other
// replicas, for up to --shutdown-timeout (10 s; 0 skips it), then stops
// cleanly (raftq dev, which stops every node at once, skips that), and
// produce and bench stop sending and wait up to --drain-timeout (30 s)
// for the answers to what they sent, saying so if that takes more than a
// second. Records still unanswered then are counted and reported, and the
// exit status is 1: without that bound, a client whose cluster had gone
// would retry them for ever.
// A second Ctrl-C quits the command at once (raftq dev still removes its
// temporary data directory and exits 130; raftq jepsen run leaves its
// report unwritten); a repeated SIGTERM changes nothing.
//
// SIGHUP makes a server node with SSL or SASL_SSL listeners, peer or
// admin TLS (and raftq dev --tls) read their certificate files again
// (server_tls.go); a reload that fails keeps the previous certificate.
// SIGHUP never stops a server node: one without TLS files logs that it
// had nothing to reload (server_hup.go). Every client command
// speaks TLS with --tls and the --tls-* files (client_tls.go), and SASL
// with --sasl-* (client_sasl.go), over the same connection.
package main
