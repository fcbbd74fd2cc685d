// Package netns gives a chaos run its own network: a private network
// namespace with lo up, iptables drop rules between its loopback
// addresses, and a way for the harness to connect into it.
//
// # Address plan
//
// Inside the namespace lo holds 127.0.0.0/8, so every 127.0.0.N is local
// without configuration. Nodes bind 127.0.0.<id+1>; 127.0.0.1
// (HarnessAddr) is the harness's and its clients'. No veth pair, route or
// address outside 127.0.0.0/8 is created, and DialContext, DialFrom,
// Listen and Drop refuse anything but literal loopback addresses
// (ErrOutsideLoopback), so no name lookup or packet can leave the
// machine.
//
// # Reaching the nodes
//
// Processes run inside with Command (`ip netns exec NAME prog args`,
// which execs prog in place, so its pid is the one the caller signals).
// The harness's own connections are made by Do: a goroutine locks an OS
// thread, enters the namespace with setns(2), creates the socket, and
// returns to the original namespace before unlocking; a thread that
// cannot return is never unlocked, so Go discards it. A socket stays in
// the namespace it was created in, so the returned net.Conn works from
// any goroutine. DialContext has the signature kgo.Dialer, sarama's and
// kafka-go's dialers and http.Transport take, so client traffic needs no
// child process.
//
// # Partitions
//
// Drop installs rules `-s FROM -d TO -j DROP` in chain RAFTQ, hooked into
// INPUT. Because every packet between two nodes travels over lo, matching
// its source and destination at INPUT cuts exactly one direction between
// two nodes; a TCP connection needs both directions. Each call replaces
// the whole rule set atomically with `iptables-restore --noflush`; Heal
// is Drop of nothing. Traffic from 127.0.0.1 is never dropped, so clients
// reach every node during a partition, as Jepsen's clients do.
//
// The rules match addresses, so a node must send from its own address: a
// process that dials 127.0.0.3 without binding gets source 127.0.0.1
// and passes every partition. Guard (chain RAFTQ-GUARD) rejects with a
// TCP reset any connection from 127.0.0.1 to the listed ports (the peer
// port), so such a node fails loudly instead of silently ignoring
// partitions.
//
// The nft-backed iptables is tried first, then iptables-legacy. Available
// says what to install when ip or iptables is missing (apt-get install
// iproute2 iptables).
//
// # Cleanup
//
// Close kills every process left in the namespace (`ip netns pids`),
// deletes it and closes its handle. Names are raftq-<pid>-<random>;
// CleanupStale deletes those whose creating process is dead, after
// killing what is still inside.
//
// # Goroutines
//
// Namespace methods are safe for concurrent use; mu serializes rule
// changes and Close. Do runs its function on a fresh goroutine.
package netns
