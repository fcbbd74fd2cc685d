package peer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// fuzzMax keeps fuzzed frame sizes small enough to explore.
const fuzzMax = 64 << 10

// typedStreamErr reports whether err is one a stream reader may return for
// hostile bytes: the input ended, or it was recognised as bad.
func typedStreamErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, ErrCorruptFrame) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrSnapshotFailed)
}

func frameSeeds() [][]byte {
	batch, _ := appendBatch(nil, sampleBatch(), fuzzMax)
	split, _ := appendBatch(nil, sampleBatch(), 1100)
	stream := appendFrame(nil, kindPing, nil)
	stream = append(stream, batch...)
	stream = appendFrame(stream, kindChunk, []byte("body bytes"))
	stream = appendFrame(stream, kindEnd, nil)
	stream = appendAck(stream, errors.New("disk full"))
	corrupt := bytes.Clone(batch)
	corrupt[20] ^= 0xff
	return [][]byte{nil, batch, split, stream, corrupt, batch[:len(batch)-3], {0x40, 0, 0, 0, 0, 0, 0, 0}, appendAck(nil, nil)}
}

// FuzzFrameDecoder feeds arbitrary bytes to the frame reader and the batch,
// ack and snapshot-stream decoders. They must not panic, must fail with a
// typed error, and whatever they accept must survive re-encoding.
func FuzzFrameDecoder(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 64, fuzzMax)
		for {
			kind, body, err := fr.next()
			if err != nil {
				if !typedStreamErr(err) {
					t.Fatalf("untyped frame error: %v", err)
				}
				break
			}
			checkBody(t, kind, body)
		}
		checkSnapshotStream(t, data)
	})
}

func checkBody(t *testing.T, kind byte, body []byte) {
	switch kind {
	case kindBatch:
		envs, err := decodeBatch(body)
		if err != nil {
			if !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("untyped batch error: %v", err)
			}
			return
		}
		again, st := appendBatch(nil, envs, fuzzMax*2)
		if st.dropped != 0 {
			t.Fatalf("re-encoding a decoded batch dropped %d messages: %v", st.dropped, st.firstErr)
		}
		_, body2, err := newFrameReader(bytes.NewReader(again), 64, fuzzMax*2).next()
		if err != nil {
			t.Fatalf("re-read re-encoded batch: %v", err)
		}
		envs2, err := decodeBatch(body2)
		if err != nil {
			t.Fatalf("decode re-encoded batch: %v", err)
		}
		if err := equalEnvelopes(envs2, envs); err != nil {
			t.Fatalf("round trip changed the batch: %v", err)
		}
	case kindAck:
		if err := decodeAck(kind, body); err != nil && !typedStreamErr(err) {
			t.Fatalf("untyped ack error: %v", err)
		}
	}
}

// FuzzBatchDecoder wraps arbitrary bodies in valid frames, so that the
// fuzzer gets past the CRC and explores the envelope, protobuf, ack and
// snapshot-stream decoding behind it. A second body follows as a chunk.
func FuzzBatchDecoder(f *testing.F) {
	batch, _ := appendBatch(nil, sampleBatch(), fuzzMax)
	f.Add(kindBatch, batch[frameHeader+1:], []byte("chunk"))
	f.Add(kindBatch, []byte{1, 2, 8, 1}, []byte{})
	f.Add(kindAck, []byte{ackFailed, 'n', 'o'}, []byte{})
	f.Add(kindChunk, []byte("x"), []byte("y"))
	f.Fuzz(func(t *testing.T, kind byte, body, chunk []byte) {
		stream := appendFrame(nil, kind, body)
		stream = appendFrame(stream, kindChunk, chunk)
		stream = appendFrame(stream, kindEnd, nil)
		fr := newFrameReader(bytes.NewReader(stream), 64, fuzzMax*2)
		for {
			kind, body, err := fr.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("valid frames failed to read: %v", err)
				}
				break
			}
			checkBody(t, kind, body)
		}
		checkSnapshotStream(t, stream)
	})
}

// checkSnapshotStream reads data as an inbound snapshot stream.
func checkSnapshotStream(t *testing.T, data []byte) {
	cr := &chunkReader{fr: newFrameReader(bytes.NewReader(data), 64, fuzzMax)}
	envs, err := cr.head()
	if err != nil {
		if !typedStreamErr(err) {
			t.Fatalf("untyped snapshot head error: %v", err)
		}
		return
	}
	if len(envs) != 1 {
		t.Fatalf("head returned %d envelopes", len(envs))
	}
	n, err := io.Copy(io.Discard, cr)
	if err != nil && !typedStreamErr(err) {
		t.Fatalf("untyped snapshot body error: %v", err)
	}
	if n != cr.n || n > int64(len(data)) {
		t.Fatalf("body of %d bytes (counted %d) from %d input bytes", n, cr.n, len(data))
	}
}

// FuzzHandshakeDecoder feeds arbitrary bytes to the hello and reply
// decoders; accepted input must re-encode to the bytes it was read from.
func FuzzHandshakeDecoder(f *testing.F) {
	f.Add(appendHello(nil, hello{version: protoVersion, stream: streamRaft, from: 1, to: 2, cluster: "prod"}))
	f.Add(appendHello(nil, hello{version: 2, stream: streamSnapshot, from: 1, to: 2, cluster: "x"}))
	f.Add(appendHello(nil, hello{version: 2, stream: streamFetch, from: 3, to: 1, cluster: "x", incarnation: "i"}))
	f.Add(appendReply(nil, reply{version: protoVersion, code: refuseNoFetch, node: 2, cluster: "prod", reason: "no fetch handler"}))
	f.Add(appendReply(nil, reply{version: protoVersion, node: 2, cluster: "prod"}))
	f.Add(appendReply(nil, reply{version: protoVersion, code: refuseCluster, node: 2, cluster: "prod", reason: "cluster id mismatch"}))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		if h, err := readHello(r); err == nil {
			used := data[:len(data)-r.Len()]
			if again := appendHello(nil, h); !bytes.Equal(again, used) {
				t.Fatalf("hello %+v re-encodes to %x, read from %x", h, again, used)
			}
		} else if !errors.Is(err, ErrBadHandshake) && !errors.Is(err, ErrVersion) {
			t.Fatalf("untyped hello error: %v", err)
		}
		r = bytes.NewReader(data)
		rp, err := readReply(r)
		if err != nil {
			if !errors.Is(err, ErrBadHandshake) {
				t.Fatalf("untyped reply error: %v", err)
			}
			return
		}
		used := data[:len(data)-r.Len()]
		if again := appendReply(nil, rp); !bytes.Equal(again, used) {
			t.Fatalf("reply %+v re-encodes to %x, read from %x", rp, again, used)
		}
		if err := judgeReply(rp, 2, "prod", refuseIncarnation2); err != nil {
			var re *RefusedError
			if !errors.As(err, &re) && !isRefusal(err) {
				t.Fatalf("judgeReply returned an unexpected error: %v", err)
			}
			_ = err.Error()
		}
	})
}

// FuzzFetchFrameDecoder reads raw as a fetch stream, and wraps kind and
// body in a valid frame so that the fuzzer gets past the CRC to the fetch
// frame decoder. It must not panic, must fail with a typed error, and what
// it accepts must re-encode to the frame it was read from.
func FuzzFetchFrameDecoder(f *testing.F) {
	req := appendFetchFrame(nil, fetchFrame{kind: kindFetchReq, budget: 500 * time.Millisecond, body: []byte("fetch offset 42")})
	resp := appendFetchFrame(nil, fetchFrame{kind: kindFetchResp, body: []byte("records")})
	ferr := appendFetchFrame(nil, fetchErrFrame("response of 99 bytes, limit 4"))
	stream := append(append(append([]byte(nil), req...), resp...), ferr...)
	torn := bytes.Clone(req)
	torn[frameHeader+3] ^= 0x80
	for _, raw := range [][]byte{nil, req, resp, ferr, stream, torn, req[:len(req)-2], {0x40, 0, 0, 0, 0, 0, 0, 0}} {
		kind := kindFetchResp
		if len(raw) > frameHeader {
			kind = raw[frameHeader]
		}
		f.Add(kind, raw[min(len(raw), frameHeader+1):], raw)
	}
	f.Add(kindFetchReq, []byte{0, 0, 0, 0, 0, 0, 0, 0}, []byte{})
	f.Add(kindFetchErr, []byte{2, 'x'}, []byte{})
	f.Fuzz(func(t *testing.T, kind byte, body, raw []byte) {
		fr := newFrameReader(bytes.NewReader(raw), 64, fuzzMax)
		for {
			kind, body, err := fr.next()
			if err != nil {
				if !typedStreamErr(err) {
					t.Fatalf("untyped frame error: %v", err)
				}
				break
			}
			checkFetchFrame(t, kind, body)
		}
		frame := appendFrame(nil, kind, body)
		got, gotBody, err := newFrameReader(bytes.NewReader(frame), 64, fuzzMax*2).next()
		if err != nil {
			t.Fatalf("a valid frame failed to read: %v", err)
		}
		checkFetchFrame(t, got, gotBody)
	})
}

func checkFetchFrame(t *testing.T, kind byte, body []byte) {
	ff, err := decodeFetchFrame(kind, body)
	if err != nil {
		if !errors.Is(err, ErrCorruptFrame) {
			t.Fatalf("untyped fetch frame error: %v", err)
		}
		return
	}
	if ff.kind == kindFetchReq && (ff.budget <= 0 || ff.budget > maxBudget) {
		t.Fatalf("accepted a request budget of %v", ff.budget)
	}
	if again, want := appendFetchFrame(nil, ff), appendFrame(nil, kind, body); !bytes.Equal(again, want) {
		t.Fatalf("fetch frame %+v re-encodes to %x, read from %x", ff, again, want)
	}
}

// refuseIncarnation2 refuses node 2 unless it presents incarnation "b".
func refuseIncarnation2(node uint64, incarnation string) error {
	if node == 2 && incarnation != "b" {
		return fmt.Errorf("node 2 is incarnation b, not %q", incarnation)
	}
	return nil
}
