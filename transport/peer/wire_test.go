package peer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/raftq/raftq/raftgroup"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// appendBatch encodes batch as session.encode does: sizeBatch, then
// appendSized in frames of at most max payload bytes.
func appendBatch(dst []byte, batch []raftgroup.Envelope, max int) ([]byte, encodeStats) {
	sizes, total := sizeBatch(batch)
	return appendSized(dst, batch, sizes, total, max)
}

// sampleBatch mixes message types, groups and sizes.
func sampleBatch() []raftgroup.Envelope {
	snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: &raftpb.Snapshot{
		Data:     []byte("meta"),
		Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
	}}
	return []raftgroup.Envelope{
		heartbeat(0),
		{Group: 1 << 40, Msg: msg(7, bytes.Repeat([]byte{0xab}, 1000))},
		{Group: 3, Msg: snap},
		{Group: 4, Msg: &raftpb.Message{}},
		{Group: 5, Msg: &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), Reject: new(true), RejectHint: new(uint64(12)), Context: []byte("ctx")}},
	}
}

func readAll(t *testing.T, stream []byte, max int) [][]raftgroup.Envelope {
	t.Helper()
	fr := newFrameReader(bytes.NewReader(stream), 64, max)
	var out [][]raftgroup.Envelope
	for {
		kind, body, err := fr.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(out), err)
		}
		if kind != kindBatch {
			t.Fatalf("frame %d: kind %d", len(out), kind)
		}
		envs, err := decodeBatch(body)
		if err != nil {
			t.Fatalf("frame %d: %v", len(out), err)
		}
		out = append(out, envs)
	}
}

func equalEnvelopes(a, b []raftgroup.Envelope) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d envelopes, want %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Group != b[i].Group || !proto.Equal(a[i].Msg, b[i].Msg) {
			return fmt.Errorf("envelope %d: %s, want %s", i, describe(a[i]), describe(b[i]))
		}
	}
	return nil
}

func TestBatch_RoundTrip(t *testing.T) {
	want := sampleBatch()
	stream, st := appendBatch(nil, want, 1<<20)
	if st.frames != 1 || st.msgs != len(want) || st.dropped != 0 {
		t.Fatalf("encode stats %+v", st)
	}
	frames := readAll(t, stream, 1<<20)
	if len(frames) != 1 {
		t.Fatalf("%d frames, want 1", len(frames))
	}
	if err := equalEnvelopes(frames[0], want); err != nil {
		t.Fatal(err)
	}
}

func TestBatch_DecodedMessagesDoNotAliasTheFrame(t *testing.T) {
	stream, _ := appendBatch(nil, []raftgroup.Envelope{{Group: 1, Msg: msg(1, []byte("original"))}}, 1<<20)
	fr := newFrameReader(bytes.NewReader(stream), 64, 1<<20)
	_, body, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	envs, err := decodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 0 // the reader reuses its buffer for the next frame
	}
	if got := string(envs[0].Msg.Entries[0].Data); got != "original" {
		t.Errorf("entry data %q changed with the frame buffer", got)
	}
}

func TestBatch_SplitsOverMaxFrameAndKeepsOrder(t *testing.T) {
	var want []raftgroup.Envelope
	for i := range 40 {
		want = append(want, raftgroup.Envelope{Group: uint64(i), Msg: msg(uint64(i), make([]byte, 300))})
	}
	stream, st := appendBatch(nil, want, 4096)
	if st.frames < 3 || st.msgs != 40 || st.dropped != 0 {
		t.Fatalf("encode stats %+v", st)
	}
	var got []raftgroup.Envelope
	for _, f := range readAll(t, stream, 4096) {
		got = append(got, f...)
	}
	if err := equalEnvelopes(got, want); err != nil {
		t.Fatal(err)
	}
}

func TestBatch_DropsOversizedAndNilMessages(t *testing.T) {
	batch := []raftgroup.Envelope{
		{Group: 1, Msg: msg(1, nil)},
		{Group: 2, Msg: msg(2, make([]byte, 5000))},
		{Group: 3},
		{Group: 4, Msg: msg(4, nil)},
	}
	stream, st := appendBatch(nil, batch, 4096)
	if st.msgs != 2 || st.dropped != 2 || !errors.Is(st.firstErr, ErrMessageTooLarge) {
		t.Fatalf("encode stats %+v", st)
	}
	frames := readAll(t, stream, 4096)
	if err := equalEnvelopes(frames[0], []raftgroup.Envelope{batch[0], batch[3]}); err != nil {
		t.Fatal(err)
	}
	if out, st := appendBatch(nil, batch[2:3], 4096); len(out) != 0 || st.frames != 0 {
		t.Errorf("a batch with nothing to send produced %d bytes", len(out))
	}
}

// TestFrame_EveryByteFlipIsCaught flips each byte of a two-frame stream in
// turn: the reader must report an error, never a batch that differs.
func TestFrame_EveryByteFlipIsCaught(t *testing.T) {
	want := sampleBatch()
	stream, _ := appendBatch(nil, want[:2], 1<<20)
	stream, _ = appendBatch(stream, want[2:], 1<<20)
	for i := range stream {
		bad := bytes.Clone(stream)
		bad[i] ^= 0x40
		fr := newFrameReader(bytes.NewReader(bad), 64, 1<<20)
		var err error
		for err == nil {
			var body []byte
			var kind byte
			if kind, body, err = fr.next(); err == nil && kind != kindBatch {
				err = fmt.Errorf("kind %d", kind)
			}
			if err == nil {
				_, err = decodeBatch(body)
			}
		}
		if err == io.EOF {
			t.Fatalf("flip at byte %d went unnoticed", i)
		}
		if !errors.Is(err, ErrCorruptFrame) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("flip at byte %d: untyped error %v", i, err)
		}
	}
}

func TestFrame_RejectsBadFramesBeforeAllocating(t *testing.T) {
	cases := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"too large", []byte{0x7f, 0, 0, 0, 0, 0, 0, 0}, ErrFrameTooLarge},
		{"zero length", make([]byte, 8), ErrCorruptFrame},
		{"truncated header", []byte{0, 0, 0}, io.ErrUnexpectedEOF},
		{"truncated payload", []byte{0, 0, 0, 9, 0, 0, 0, 0, 1}, io.ErrUnexpectedEOF},
	}
	bad := appendFrame(nil, kindPing, []byte("x"))
	bad[len(bad)-1] = 'y'
	cases = append(cases, struct {
		name   string
		stream []byte
		want   error
	}{"crc mismatch", bad, ErrCorruptFrame})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fr := newFrameReader(bytes.NewReader(tc.stream), 64, 4096)
			if _, _, err := fr.next(); !errors.Is(err, tc.want) {
				t.Errorf("next() = %v, want %v", err, tc.want)
			}
			if cap(fr.buf) > 4096 {
				t.Errorf("reader allocated %d bytes for a bad frame", cap(fr.buf))
			}
		})
	}
}

func TestBatch_RejectsBadBodies(t *testing.T) {
	good, _ := appendBatch(nil, []raftgroup.Envelope{heartbeat(1)}, 4096)
	body := good[frameHeader+1:]
	cases := map[string][]byte{
		"empty":         {},
		"bad varint":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"size too big":  {1, 0x7f},
		"truncated":     body[:len(body)-1],
		"trailing":      append(bytes.Clone(body), 0x01),
		"bad protobuf":  {1, 2, 0xff, 0xff},
		"size overflow": {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		if envs, err := decodeBatch(b); !errors.Is(err, ErrCorruptFrame) {
			t.Errorf("%s: decodeBatch = %d envelopes, %v; want ErrCorruptFrame", name, len(envs), err)
		}
	}
}

func TestHello_RoundTripAndTruncation(t *testing.T) {
	want := hello{version: protoVersion, stream: streamSnapshot, from: 3, to: 1 << 60, cluster: "prod-eu"}
	b := appendHello(nil, want)
	got, err := readHello(bytes.NewReader(b))
	if err != nil || got != want {
		t.Fatalf("readHello = %+v, %v; want %+v", got, err, want)
	}
	for i := range len(b) {
		if _, err := readHello(bytes.NewReader(b[:i])); !errors.Is(err, ErrBadHandshake) {
			t.Errorf("prefix of %d bytes: %v, want ErrBadHandshake", i, err)
		}
	}
	if _, err := readHello(bytes.NewReader(nil)); !isSilentProbe(err) {
		t.Errorf("empty connection is not a silent probe: %v", err)
	}
	if _, err := readHello(bytes.NewReader(b[:7])); isSilentProbe(err) {
		t.Errorf("a cut hello counts as a silent probe: %v", err)
	}
}

func TestHello_RejectsNonsense(t *testing.T) {
	base := hello{version: protoVersion, stream: streamRaft, from: 1, to: 2, cluster: "c"}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), ErrBadHandshake},
		{"version", appendHello(nil, hello{version: 9, stream: 1, from: 1, to: 2, cluster: "c"}), ErrVersion},
		{"stream", appendHello(nil, hello{version: protoVersion, stream: 7, from: 1, to: 2, cluster: "c"}), ErrBadHandshake},
		{"from 0", appendHello(nil, hello{version: protoVersion, stream: 1, to: 2, cluster: "c"}), ErrBadHandshake},
		{"no cluster", appendHello(nil, hello{version: protoVersion, stream: 1, from: 1, to: 2}), ErrBadHandshake},
	}
	if _, err := readHello(bytes.NewReader(appendHello(nil, base))); err != nil {
		t.Fatalf("base hello: %v", err)
	}
	for _, tc := range cases {
		if _, err := readHello(bytes.NewReader(tc.b)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestReply_RoundTripAndJudgement(t *testing.T) {
	ok := reply{version: protoVersion, node: 2, cluster: "c", incarnation: "b"}
	got, err := readReply(bytes.NewReader(appendReply(nil, ok)))
	if err != nil || got != ok {
		t.Fatalf("readReply = %+v, %v", got, err)
	}
	if err := judgeReply(got, 2, "c", refuseIncarnation2); err != nil {
		t.Errorf("judge ok reply: %v", err)
	}
	for _, tc := range []struct {
		rp   reply
		want error
	}{
		{reply{version: protoVersion, node: 3, cluster: "c"}, ErrWrongNode},
		{reply{version: protoVersion, node: 2, cluster: "d"}, ErrClusterID},
		{reply{version: protoVersion + 1, node: 2, cluster: "c"}, ErrVersion},
		{reply{version: protoVersion, node: 2, cluster: "c", incarnation: "x"}, ErrIncarnation},
		{reply{version: protoVersion, code: refuseDuplicate, node: 2, cluster: "c", reason: "dup"}, ErrDuplicateID},
		{reply{version: protoVersion, code: 200, node: 2, cluster: "c"}, ErrBadHandshake},
	} {
		rp, err := readReply(bytes.NewReader(appendReply(nil, tc.rp)))
		if err != nil {
			t.Fatal(err)
		}
		if err := judgeReply(rp, 2, "c", refuseIncarnation2); !errors.Is(err, tc.want) {
			t.Errorf("judge %+v: %v, want %v", tc.rp, err, tc.want)
		}
	}
	b := appendReply(nil, reply{version: protoVersion, code: refuseCluster, node: 2, cluster: "c", reason: "why"})
	for i := range len(b) {
		if _, err := readReply(bytes.NewReader(b[:i])); !errors.Is(err, ErrBadHandshake) {
			t.Errorf("reply prefix of %d bytes: %v", i, err)
		}
	}
}

func TestAck_RoundTrip(t *testing.T) {
	for _, in := range []error{nil, errors.New("disk full")} {
		fr := newFrameReader(bytes.NewReader(appendAck(nil, in)), 64, 1<<16)
		kind, body, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		err = decodeAck(kind, body)
		if (in == nil) != (err == nil) || (in != nil && !errors.Is(err, ErrSnapshotFailed)) {
			t.Errorf("ack of %v decoded as %v", in, err)
		}
	}
	if err := decodeAck(kindPing, nil); !errors.Is(err, ErrCorruptFrame) {
		t.Errorf("ping as ack: %v", err)
	}
}
