// Package peer carries raft traffic between the nodes of a raftq cluster
// over TCP. It implements raftgroup.Transport: the Host hands it batches of
// envelopes (group id + raftpb.Message) for a destination node, and it
// delivers inbound batches and snapshots to a raftgroup.Receiver. It also
// carries the request/response fetch stream ISR followers fetch from
// leaders on (Transport.Fetch, Config.FetchHandler), on the same port so
// that whatever cuts a node's raft traffic cuts its replication too.
//
// # Connections
//
// Each pair of nodes shares one long-lived TCP connection, the raft stream,
// carrying both directions. The node with the lower id dials it; the other
// accepts. That rule needs no tie-break protocol: both nodes know who dials,
// so there is never a second connection to reconcile. The dialler redials
// with jittered exponential backoff (BackoffMin doubling to BackoffMax, each
// wait drawn from [d/2, d]); the acceptor waits, and a newer accepted
// connection from the same peer replaces the old one unless the old one
// is live (see Handshake: that is a duplicate node id). Consequences: the
// lower node must know the higher node's address (AddPeer) before either can
// talk, and traffic from the higher node waits for the lower one to dial in.
//
// Snapshots travel on a separate stream: SendSnapshot dials a new TCP
// connection per snapshot (whichever node sends), so a large or slow body
// never sits in front of heartbeats. At most MaxSnapshotsPerPeer streams run
// towards, and are accepted from, each peer; beyond that SendSnapshot
// reports ErrSnapshotBusy at once and raft retries later.
//
// Fetch streams are a third kind: see Fetch streams below. Join streams
// are a fourth, the only one open to a node that is not a peer: see Join
// streams below.
//
// # TLS
//
// With Config.ServerTLS and ClientTLS (set together) every connection on
// the peer port is TLS, whatever its stream kind: raft, snapshot, fetch
// and join streams alike (JoinConfig.TLS for Join). The TLS handshake
// comes first, bounded by HandshakeTimeout; the hello below is written
// only once it is done, so cluster ids, node ids and incarnations travel
// encrypted. Invariants, with tlsfiles.Store's configs (mutual TLS):
//
//   - An accepted connection whose client presents no certificate, one
//     that does not chain to the CA bundle, or an expired one, is refused
//     at the TLS handshake: its hello is never read, so none of the
//     checks below run and nothing of the node's state is touched. The
//     refusal is logged at ERROR with the remote address and crypto/tls's
//     reason and counted in Stats.TLSRefusedInbound (not in
//     RefusedInbound). A connection that closes before sending a byte is
//     a silent probe, logged at DEBUG and not counted, as for plain TCP.
//   - Garbage is such a refusal too. A raftq peer without TLS, whose
//     plaintext hello arrives instead of a ClientHello, is refused the
//     same way and also told in the clear, with ErrTLS, that this node
//     requires TLS; a node without TLS that gets a ClientHello refuses
//     it with ErrBadHandshake saying so. Each side's log names the fix.
//   - A dialler verifies the acceptor's certificate the same way and
//     drops it on failure. Under TLS 1.3 the acceptor judges the
//     dialler's certificate after the dialler's handshake has returned,
//     so a refused dialler learns it from the alert on its first read;
//     both show as ErrTLS (and ErrCertificate for a certificate either
//     side refused, which no retry changes) and count in
//     Stats.TLSFailedOutbound.
//   - TLS verifies the chain only, not names: peers dial addresses, often
//     IPs, that certificates need not list. (A ClientTLS that sets
//     neither ServerName nor InsecureSkipVerify gets the dialled host
//     name checked, as tls.Dial.) Without Config.CheckPeerCertificate
//     any certificate from the CA is any node's, so the CA must be the
//     cluster's own, issuing node certificates only. With it, the
//     certificate must also satisfy it for the node id it stands for:
//     an accepted stream's hello's claim (checked right after the hello
//     is read, before any other check, a join's too) and a dialled
//     stream's target (checked before the hello is written); a failure
//     is ErrCertificate, refused on the accepting side like any hello
//     (RefusedInbound) and counted in TLSFailedOutbound on the dialling
//     side.
//   - The configs are read at every handshake, so a Store that reloads
//     its files changes what the next connection presents and trusts;
//     connections already open keep theirs.
//   - Closing a TLS connection drops the TCP connection without writing
//     close_notify first, so a paused peer never holds up Close.
//
// # Handshake
//
// Every connection opens (after the TLS handshake, with TLS) with a hello from the dialler: magic "RQPR",
// protocol version, stream kind (raft, snapshot, fetch or join), sender node id, intended
// receiver node id, cluster id, incarnation. The acceptor answers with a
// reply whose layout is fixed across versions: magic, version, status code,
// its node id, its cluster id, and a reason text; an acceptance adds the
// acceptor's incarnation. It refuses, logging at ERROR and sending
// the reason before closing, a peer that
//
//   - speaks another protocol version (ErrVersion) or is not a raftq peer
//     at all (ErrBadHandshake);
//   - belongs to another cluster (ErrClusterID);
//   - claims the acceptor's own node id (ErrDuplicateID);
//   - claims the id of a peer whose raft stream is live, having carried a
//     frame within min(3*KeepaliveInterval, ReadTimeout) (ErrDuplicateID):
//     a second process started with an id in use. The first keeps the
//     id; a restarted peer's old stream has ended (or falls silent past
//     that window), so its redial is accepted and replaces the old one;
//   - opens a fetch stream while its previous fetch stream here is live
//     (ErrDuplicateID; see Fetch streams);
//   - opens a fetch stream to a node without a FetchHandler
//     (ErrNoFetchHandler);
//   - presents an incarnation that Config.CheckIncarnation refuses
//     (ErrIncarnation): in raftq, a node id the metadata registered from
//     another data directory, i.e. a node whose data was wiped. It lost
//     the log entries and votes it acknowledged, and rejoining under the
//     old id could elect a leader without committed entries;
//   - meant to reach another node id (ErrWrongNode: a stale address);
//   - is not among the acceptor's peers (ErrUnknownPeer);
//   - dials a raft stream although its id is the higher (ErrWrongDirection);
//   - has too many snapshot streams open (ErrSnapshotBusy, at WARN).
//
// The dialler gets a *RefusedError that unwraps to the same sentinel and
// logs it at ERROR; it also checks the reply itself (cluster id, node id,
// and the acceptor's incarnation, since the lower id dials and a wiped
// node may be the acceptor).
//
// # Wire format
//
// After the handshake every stream carries frames (big-endian):
//
//	length uint32   bytes of kind + body, at most MaxFrameBytes
//	                (MaxFetchBytes+9 on a fetch stream)
//	crc    uint32   CRC-32C of kind + body
//	kind   byte     1 batch, 2 ping, 3 chunk, 4 end, 5 ack, 6 bye,
//	                7 fetch request, 8 fetch response, 9 fetch error
//	body
//
// A batch body is a run of envelopes, each: group uvarint, size uvarint,
// size bytes of raftpb.Message in protobuf encoding. One Send becomes one
// frame, split into several when it would exceed MaxFrameBytes (a single
// message over the limit is dropped and logged). Pings keep an idle raft
// stream alive. A node that stops cleanly (Close) sends bye on each raft
// stream before it hangs up, waiting at most 500 ms in all; its peers then
// log the end of the stream, and their failed redials until it is back, at
// INFO, keeping WARN for failures. Dials to a peer not reached since Start
// are INFO too for StartupGrace (10 s), while a cluster's nodes come up one
// after another (farewell.go). A snapshot stream carries one batch frame with the MsgSnap
// envelope, chunk frames of body (SnapshotChunkBytes each), an end frame,
// and in the other direction one ack frame (status byte, error text) sent
// once the receiver's ReceiveSnapshot has returned.
//
// Decoding trusts nothing: the length is checked against MaxFrameBytes
// before anything is allocated, the CRC before anything is parsed, and the
// envelope structure before any message is allocated. A bad frame is a
// typed error (ErrFrameTooLarge, ErrCorruptFrame) that closes that one
// connection with an ERROR log line; the dialler reconnects. Decoded
// messages never alias the read buffer.
//
// # Fetch streams
//
// Transport.Fetch(ctx, to, req) sends opaque bytes to node to and returns
// what to's Config.FetchHandler(from, req, deadline) answered; raftq puts
// Kafka's own Fetch request and response in them. The contract:
//
//   - The fetching node dials (whatever the ids), with hello stream kind
//     3 and the usual checks, on the first Fetch towards a peer; the
//     stream is kept and reused by every later call, so each (fetcher,
//     leader) pair has one. After a failure the next call redials, first
//     waiting out the package's jittered backoff (bounded by its ctx); a
//     successful round trip resets the backoff. A new AddPeer address is
//     used from the next dial.
//   - One request is outstanding per stream: concurrent Fetch calls for
//     one peer take turns, each waiting (bounded by its ctx) for the one
//     before. Calls for different peers are independent.
//   - Frames: a request is kind 7 with body budget uint64 (nanoseconds the
//     caller will wait: its ctx deadline's remaining time, or ReadTimeout
//     without one) and the request bytes; the answer is kind 8 with the
//     response bytes, or kind 9 with a code byte (1: too large) and a
//     reason. The leader sends the remaining time, not a clock reading,
//     since the nodes' clocks need not agree.
//   - The handler's deadline is the request's arrival plus its budget,
//     less min(budget/10, 50 ms) so that an answer given at the deadline
//     arrives before the caller's expires. A long-polling handler waits
//     up to it; the fetcher stops reading at its own deadline.
//   - MaxFetchBytes bounds the request and the response, in both
//     directions. A request over the fetcher's own limit is refused before
//     anything is sent; over the leader's, the leader skips its body and
//     answers kind 9; a response over the leader's limit becomes kind 9;
//     over the fetcher's, the fetcher skips it. Each is ErrFetchTooLarge
//     with the sizes, and the stream stays in step and open. A corrupt
//     frame (CRC, unknown kind, malformed body, a second request while one
//     is outstanding) closes that stream only, with an ERROR log line and
//     CorruptFrames counted, and the fetcher redials on its next call.
//   - A Fetch whose ctx ends mid-request returns ctx's error and closes the
//     stream, since the late answer would be out of step; the leader's
//     handler for it runs on until it returns. A Fetch under way when the
//     stream breaks or the leader stops gets ErrFetchAborted; at this
//     node's Close, ErrClosed; after RemovePeer, ErrUnknownPeer.
//   - Duplicate ids: a fetch stream counts as live the way the raft stream
//     does, while it is open and either has a request in flight or carried
//     one within min(3*KeepaliveInterval, ReadTimeout) (a follower fetches
//     continuously, so its stream always is). A second fetch stream from
//     the same id while the first is live is refused with ErrDuplicateID:
//     a second process's fetch offsets would pass for the real node's log
//     end and move the high watermark. A stream that is not live is
//     replaced by the new one. A fetcher refused as a duplicate within that
//     window after it closed its own previous stream (a cancelled request:
//     the leader has not yet seen the close) retries with backoff within
//     its ctx; a node that had no stream there gets the refusal. The raft
//     and fetch streams are judged separately: a node's live fetch stream
//     never keeps its own raft redial out, nor the reverse.
//   - The leader's handler calls for one fetcher never overlap and run in
//     order: a stream that replaces an earlier one waits for the earlier
//     one's handler to return before reading its first request.
//   - There is no read timeout between requests on the leader's side (a
//     fetcher may pause); TCP keepalive, on by default for accepted
//     connections, ends a stream whose fetcher vanished, and the liveness
//     rule above lets its redial in meanwhile.
//
// # Join streams
//
// Join(ctx, cfg, addr, req) is how a node that is not yet a member asks
// one that is, at its peer address, to let it in; raftq's --seeds are
// peer addresses. It needs no Transport: the joiner may not know the
// cluster id yet. The contract:
//
//   - The hello has stream kind 4, the joiner's id and incarnation, to 0
//     (the joiner need not know whom it reaches) and the cluster id it
//     means to join, or none to learn it. The acceptor refuses a named
//     cluster other than its own (ErrClusterID), its own id
//     (ErrDuplicateID), a named receiver other than itself
//     (ErrWrongNode), node id 0 (ErrBadHandshake), and any join when it
//     has no Config.JoinHandler (ErrNoJoinHandler); it does not require
//     the joiner to be a peer, nor judge its incarnation (the handler
//     does, against the cluster's metadata). The reply carries the
//     acceptor's id and cluster id.
//   - Then one kind 10 frame with the request and one kind 11 frame with
//     the JoinHandler's answer, each at most MaxJoinBytes; the acceptor
//     closes the stream. The handler's ctx ends at JoinTimeout after the
//     handshake or at Close; Close waits for it.
//   - Nothing else changes: a join never adds the joiner as a peer (the
//     broker does, from the metadata its handler commits), so its later
//     raft stream is judged as any peer's.
//   - A node of an earlier version refuses stream kind 4 as malformed.
//
// Stats counts, per side, requests, bytes, dials and errors
// (FetchRequests, FetchErrors, FetchDials, FetchDialErrors,
// FetchBytesSent/Received; FetchesServed, FetchServeErrors,
// FetchServedBytesIn/Out).
//
// # Batching, backpressure and time
//
// Send never blocks: it puts the batch in the peer's queue (QueueSize
// batches) or drops it and returns false. The queue is kept while the peer
// is unreachable, bounded by its size; raft tolerates stale and lost
// messages. The writer takes a batch, then drains whatever else is queued
// into the same buffer, up to WriteBufferBytes, and writes it in one call:
// a lone heartbeat goes out at once, and under load many batches share a
// syscall (the buffer plays the part of a bufio.Writer flushed when the
// queue is empty, without its extra copy). Order: batches to one peer are
// delivered in the order Send accepted them; a connection failure may lose
// batches in flight but never reorders or duplicates them, because a
// session's reader is joined before the next session starts. Heartbeats do
// share the raft stream's FIFO with MsgApp: their delay is bounded by the
// bytes queued ahead of them, which raft's MaxSizePerMsg and
// MaxInflightMsgs bound per group.
//
// Every idle KeepaliveInterval the writer sends a ping; a raft stream silent
// for ReadTimeout, or a write stuck for WriteTimeout, is closed, so a
// partitioned or paused peer is noticed even when all groups are quiescent.
//
// # Goroutines and ownership
//
//   - acceptLoop (one): accepts connections and starts a handshake
//     goroutine for each.
//   - handleInbound (one per accepted connection): handshakes; hands a raft
//     stream to its peer's run goroutine; serves a snapshot stream itself,
//     calling Receiver.ReceiveSnapshot, until it ends.
//   - peer.run (one per peer): owns the peer's raft stream. It dials (lower
//     id) or waits for the accepted connection (higher id), then writes:
//     it is the only consumer of the peer's queue.
//   - readLoop (one per live raft stream): reads frames and calls
//     Receiver.Receive, so Receive for one peer is called from one goroutine
//     at a time, in order. It is joined by run before the next session.
//   - SendSnapshot (one per outbound snapshot) plus its ack reader, which
//     it joins.
//   - Fetch runs on its caller's goroutine; the holder of a peer's fetcher
//     token (a channel of one) alone touches that peer's fetching side.
//   - For each accepted fetch stream, handleInbound reads requests and a
//     second goroutine, which it joins, calls FetchHandler and writes the
//     answers (the stream's only writer).
//
// Receive, ReceiveSnapshot and FetchHandler run on transport goroutines,
// concurrently with each other and across peers. Close cancels everything,
// closes every connection (fetch streams included), and waits for all these
// goroutines, including Receive, ReceiveSnapshot and FetchHandler calls
// under way (a handler should honour its deadline: Close waits for it);
// every pending SendSnapshot callback gets ErrClosed, every Fetch under way
// an error.
//
// # Locks
//
// Transport.mu is the only mutex: it guards start/close state and changes
// to the peer map (its place in the lock order: the repository's
// DESIGN.md). The peer map is copy-on-write behind an atomic pointer, so Send takes no
// lock; queues are channels; counters are atomics; the fetching side is
// owned through a one-token channel and the serving side's state is atomic,
// so the fetch stream adds no mutex.
//
// # Departures
//
//   - transport/peer imports raftgroup for Envelope, Transport and Receiver
//     (recorded in the repository DESIGN.md).
//   - A node not among the peers is refused (but on a join stream), so
//     AddPeer must precede the first connection of a new member. Raft adds the member on the existing
//     nodes when the conf change applies; until then the new node's dials
//     are refused and retried.
//
// # Performance
//
// A burst is written in pieces of about WriteBufferBytes, and each batch's
// buffer is sized once before protobuf appends to it: growing one buffer
// for a whole burst of 1 MiB MsgApps (protobuf reallocates to the exact
// size, copying everything before) cost more CPU than the disk writes.
// Small messages are bound by protobuf encoding and decoding, not by the
// connection; large ones by the copies into and out of protobuf (Unmarshal
// copies bytes fields) on top of the kernel's two. Figures and commands:
// BENCHMARKS.md.
package peer
