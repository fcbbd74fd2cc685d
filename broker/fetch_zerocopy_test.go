package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// inline turns f into the plain kmsg response with its records read in:
// the copying path that Fetch took before zero copy. It takes f's ranges
// and releases them.
func (f *fetchResponse) inline() (*kmsg.FetchResponse, error) {
	ranges, ok := f.take()
	if !ok {
		return nil, errFetchReleased
	}
	defer func() {
		for _, fr := range ranges {
			fr.r.Release()
		}
	}()
	for _, fr := range ranges {
		b, err := fr.r.AppendTo(nil)
		if err != nil {
			return nil, err
		}
		f.Topics[fr.topic].Partitions[fr.partition].RecordBatches = b
	}
	return f.FetchResponse, nil
}

func inlineFetch(t testing.TB, f *fetchResponse) *kmsg.FetchResponse {
	t.Helper()
	resp, err := f.inline()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// kmsgEncoding is kmsg's own encoding of f with the records inlined. It
// reads the ranges but leaves them to f.
func kmsgEncoding(t testing.TB, f *fetchResponse) []byte {
	t.Helper()
	for _, fr := range f.ranges {
		b, err := fr.r.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Topics[fr.topic].Partitions[fr.partition].RecordBatches = b
	}
	enc := f.AppendTo(nil)
	for _, fr := range f.ranges {
		f.Topics[fr.topic].Partitions[fr.partition].RecordBatches = []byte{}
	}
	return enc
}

// sendBody writes f's body to a loopback TCP connection, so the ranges go
// by sendfile, after a prefix as the server's writer passes one, and
// returns what the other end read after the prefix.
func sendBody(t testing.TB, f *fetchResponse) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type written struct {
		n   int64
		err error
	}
	done := make(chan written, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- written{err: err}
			return
		}
		defer c.Close()
		n, err := f.WriteBody(c, []byte("prefix"))
		done <- written{n, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	w := <-done
	if w.err != nil || w.n != int64(len(got)) || w.n != int64(len("prefix")+f.BodyLen()) {
		t.Fatalf("WriteBody = %d, %v; read %d; BodyLen %d after a 6-byte prefix", w.n, w.err, len(got), f.BodyLen())
	}
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatal("WriteBody did not send the prefix first")
	}
	return got[len("prefix"):]
}

// recordsInBatches counts the records of a record set of many batches.
func recordsInBatches(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if len(b) < 12 {
			t.Fatalf("%d bytes left after the batches", len(b))
		}
		size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if err := rb.ReadFrom(b[:size]); err != nil {
			t.Fatal(err)
		}
		n += int(rb.NumRecords)
		b = b[size:]
	}
	return n
}

// fetchVersions is the range of Fetch versions the broker serves.
func fetchVersions(t *testing.T, n *Node) (int16, int16) {
	t.Helper()
	for _, a := range n.handler().APIs() {
		if a.Key == kmsg.Fetch.Int16() {
			return a.MinVersion, a.MaxVersion
		}
	}
	t.Fatal("Fetch is not served")
	return 0, 0
}

// multiFetchRequest asks for partitions 0 to 2 and 7 of "t" (id {1}) and
// partition 0 of a topic that does not exist.
func multiFetchRequest(version int16) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID, req.MinBytes, req.MaxBytes = -1, 1, 1<<20
	topic := func(name string, id byte, parts ...int32) kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		if version >= 13 {
			rt.TopicID = [16]byte{id}
		} else {
			rt.Topic = name
		}
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, -1, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	req.Topics = append(req.Topics, topic("t", 1, 0, 1, 2, 7), topic("nope", 9, 0))
	return req
}

// Zero copy changes nothing on the wire: at every version served, the
// bytes WriteBody sends over a socket are kmsg's encoding of the same
// response with the records inlined, and BodyLen counts them exactly.
func TestFetchResponse_BytesMatchKmsgAtEveryVersion(t *testing.T) {
	reps := []*fakeReplication{newFakeReplication(t, 1), newFakeReplication(t, 1), newFakeReplication(t, 1)}
	n := newUnitNode(t, "t", nil, reps...)
	commitValues(t, reps[0], "a", "bb", "ccc")
	commitValues(t, reps[0], "dddd")
	commitValues(t, reps[0], strings.Repeat("e", 200))
	commitValues(t, reps[1], strings.Repeat("x", 300))
	// Partition 2 stays empty: a fetch at its high watermark.
	lo, hi := fetchVersions(t, n)
	if lo != 0 || hi < 16 {
		t.Fatalf("Fetch served at v%d to v%d; the test expects 0 to at least 16", lo, hi)
	}
	for v := lo; v <= hi; v++ {
		f := n.fetch(context.Background(), multiFetchRequest(v))
		if got, want := len(f.ranges), 2; got != want {
			t.Fatalf("v%d: %d partitions with records, want %d", v, got, want)
		}
		want := kmsgEncoding(t, f)
		if got := sendBody(t, f); !bytes.Equal(got, want) {
			t.Fatalf("v%d: zero-copy body (%d bytes) differs from kmsg's encoding (%d bytes)", v, len(got), len(want))
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(want); err != nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
		if got := recordsInBatches(t, resp.Topics[0].Partitions[0].RecordBatches); got != 5 {
			t.Fatalf("v%d: partition 0 carried %d records, want 5", v, got)
		}
	}
}

// The splice works whatever fields the response carries: every field kmsg
// knows, tags included, at every version, with record sets first, in the
// middle and last.
func TestSpliceRecords_EveryFieldAtEveryVersion(t *testing.T) {
	rep := newFakeReplication(t, 1)
	for i := range 4 {
		commitValues(t, rep, strings.Repeat("r", 10*i+1))
	}
	n := newUnitNode(t, "t", nil, rep)
	lo, hi := fetchVersions(t, n)
	rangeAt := func(offset int64) *partition.Range {
		r, err := rep.log.ReadRange(offset, 1, rep.log.HighWatermark())
		if err != nil || r.Size == 0 {
			t.Fatalf("range at %d: %v", offset, err)
		}
		return r
	}
	for v := lo; v <= hi; v++ {
		resp := fullFetchResponse(v)
		f := &fetchResponse{FetchResponse: resp, ranges: []fetchRange{
			{topic: 0, partition: 0, r: rangeAt(0)},
			{topic: 0, partition: 2, r: rangeAt(1)},
			{topic: 1, partition: 0, r: rangeAt(3)},
		}}
		f.seal(context.Background())
		want := kmsgEncoding(t, f)
		var got bytes.Buffer
		n, err := f.WriteBody(&got, nil)
		if err != nil || n != int64(f.BodyLen()) || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("v%d: WriteBody = %d, %v (BodyLen %d); equal to kmsg's %d bytes: %t",
				v, n, err, f.BodyLen(), len(want), bytes.Equal(got.Bytes(), want))
		}
	}
}

func fullFetchResponse(version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = 7, 0, 0x01020304
	resp.UnknownTags.Set(99, []byte{1, 2})
	part := func(index int32, code int16) kmsg.FetchResponseTopicPartition {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.ErrorCode = index, code
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1000+int64(index), 900, 5
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = 5, 6
		p.AbortedTransactions = append(p.AbortedTransactions, at)
		p.PreferredReadReplica = 2
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 3, 4
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, 2
		p.SnapshotID.EndOffset, p.SnapshotID.Epoch = 8, 9
		p.UnknownTags.Set(77, []byte{3})
		p.RecordBatches = []byte{}
		return p
	}
	topic := func(name string, id byte, parts ...kmsg.FetchResponseTopicPartition) kmsg.FetchResponseTopic {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID, t.Partitions = name, [16]byte{id, 0xff, 1}, parts
		t.UnknownTags.Set(88, []byte{4, 5, 6})
		return t
	}
	resp.Topics = append(resp.Topics,
		topic("t", 1, part(0, 0), part(1, 6), part(2, 0)),
		topic("u", 2, part(0, 0), part(1, 3)))
	rack := "r1"
	resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: 1, Host: "h", Port: 9092, Rack: &rack})
	return resp
}

// rolledReplica is a replica whose first segment (offsets 0 to 2) is
// sealed, so AdvanceStart(3) deletes it, as retention would.
func rolledReplica(t *testing.T) (*fakeReplication, *Node) {
	t.Helper()
	rep := newFakeReplication(t, 1)
	commitValues(t, rep, "a", "b", "c")
	if err := rep.log.Roll(); err != nil {
		t.Fatal(err)
	}
	return rep, newUnitNode(t, "t", nil, rep)
}

// deleteFirstSegment moves the log start past the first segment, which
// deletes it, and returns that segment's file as the fetch's range holds
// it.
func deleteFirstSegment(t *testing.T, rep *fakeReplication, f *fetchResponse) partition.File {
	t.Helper()
	if len(f.ranges) != 1 || f.ranges[0].r.Segment != 0 {
		t.Fatalf("fetch holds %d ranges, want one in segment 0", len(f.ranges))
	}
	file := f.ranges[0].r.File()
	if err := rep.log.AdvanceStart(3); err != nil {
		t.Fatal(err)
	}
	if fileClosed(file) {
		t.Fatal("retention closed a segment file that a fetch response holds")
	}
	return file
}

// fileClosed reports whether a segment file has been closed: its last
// reference, the log's or a range's, was released.
func fileClosed(f partition.File) bool {
	_, err := f.ReadAt(make([]byte, 1), 0)
	return errors.Is(err, os.ErrClosed)
}

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errors.New("connection reset")
	}
	w.left -= len(p)
	return len(p), nil
}

// A response's ranges keep their segment through retention and are
// released however the response ends: written, failed mid-write,
// abandoned with its connection, or taken, and a long poll releases
// the responses it builds and drops.
func TestFetchResponse_ReleasesRangesOnEveryPath(t *testing.T) {
	fetchAt0 := func(r *kmsg.FetchRequest) {}
	cases := []struct {
		name string
		mod  func(*kmsg.FetchRequest)
		end  func(t *testing.T, f *fetchResponse, cancel func(), want []byte)
	}{
		{"written after retention", fetchAt0, func(t *testing.T, f *fetchResponse, _ func(), want []byte) {
			var buf bytes.Buffer
			if n, err := f.WriteBody(&buf, nil); err != nil || n != int64(f.BodyLen()) || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("WriteBody = %d, %v; want the %d bytes encoded before retention", n, err, len(want))
			}
		}},
		{"write fails midway", fetchAt0, func(t *testing.T, f *fetchResponse, _ func(), _ []byte) {
			if _, err := f.WriteBody(&failingWriter{left: 10}, nil); err == nil {
				t.Fatal("WriteBody to a failing writer succeeded")
			}
		}},
		{"connection ends first", fetchAt0, func(t *testing.T, f *fetchResponse, cancel func(), _ []byte) {
			cancel()
			eventually(t, "the ranges released", func() bool { return f.state.Load() == fetchReleased })
			var buf bytes.Buffer
			if n, err := f.WriteBody(&buf, nil); !errors.Is(err, errFetchReleased) || n != 0 || buf.Len() != 0 {
				t.Fatalf("WriteBody after release = %d, %v; want nothing written, %v", n, err, errFetchReleased)
			}
		}},
		{"taken", fetchAt0, func(t *testing.T, f *fetchResponse, cancel func(), want []byte) {
			resp := inlineFetch(t, f)
			cancel()
			if got := resp.AppendTo(nil); !bytes.Equal(got, want) {
				t.Fatal("inlined response differs from the zero-copy encoding")
			}
		}},
		{"long poll that waited", func(r *kmsg.FetchRequest) {
			r.MinBytes, r.MaxWaitMillis = 1<<20, 20
		}, func(t *testing.T, f *fetchResponse, _ func(), want []byte) {
			if got := sendBody(t, f); !bytes.Equal(got, want) {
				t.Fatal("body differs from kmsg's encoding")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, n := rolledReplica(t)
			req := fetchRequest("t", 0, 0, -1)
			// Partition 1 does not exist: the long poll case needs a
			// watch, which a partition at its high watermark gives.
			tc.mod(req)
			if req.MinBytes > 1 {
				rep2 := newFakeReplication(t, 1)
				n = newUnitNode(t, "t", nil, rep, rep2)
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 1, -1, 1<<20
				req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := n.fetch(ctx, req)
			want := kmsgEncoding(t, f)
			file := deleteFirstSegment(t, rep, f)
			tc.end(t, f, cancel, want)
			if !fileClosed(file) {
				t.Fatal("the deleted segment is still open: a range was not released")
			}
		})
	}
}

// A consumer that disconnects while its fetch is being sent: the range
// outlives retention during the write and is released when the write
// fails.
func TestFetch_ConnectionDiesMidWriteReleasesRange(t *testing.T) {
	rep := newFakeReplication(t, 1)
	value := strings.Repeat("v", 100<<10)
	values := make([]string, 10)
	for i := range values {
		values[i] = value
	}
	const batches = 16 // 16 MiB: more than loopback socket buffers hold
	for range batches {
		commitValues(t, rep, values...)
	}
	if err := rep.log.Roll(); err != nil {
		t.Fatal(err)
	}
	n := newUnitNode(t, "t", nil, rep)
	kc := kafka.DefaultConfig()
	kc.Addr = "127.0.0.1:0"
	srv, err := kafka.Start(kc, n.handler())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	req := fetchRequest("t", 0, 0, -1)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 64<<20, 64<<20
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(size[:]); got < batches*1e6 {
		t.Fatalf("response of %d bytes, want all %d batches", got, batches)
	}
	r, err := rep.log.ReadRange(0, 1, rep.log.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	file := r.File()
	r.Release()
	if err := rep.log.AdvanceStart(rep.log.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	if fileClosed(file) {
		t.Fatal("retention closed the segment while a fetch was sending it")
	}
	c.Close()
	eventually(t, "the fetch's range released", func() bool { return fileClosed(file) })
}
