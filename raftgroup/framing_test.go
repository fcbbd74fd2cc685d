package raftgroup

import (
	"bytes"
	"errors"
	"testing"
)

func TestFrame_RoundTrip(t *testing.T) {
	o := origin{node: 3, id: 1<<40 + 7}
	got, payload, err := unframe(frame(o, []byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	if got != o || string(payload) != "hello" {
		t.Fatalf("unframe = %+v %q, want %+v hello", got, payload, o)
	}
}

func TestUnframe_Rejects(t *testing.T) {
	for name, data := range map[string][]byte{
		"short":     {1, 2, 3},
		"version":   append([]byte{9}, make([]byte, 20)...),
		"zero node": append([]byte{1}, make([]byte, 20)...),
	} {
		if _, _, err := unframe(data); !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: err = %v, want ErrBadFrame", name, err)
		}
	}
	if o, p, err := unframe(nil); err != nil || o != (origin{}) || p != nil {
		t.Errorf("unframe(nil) = %+v %q %v, want the no-op", o, p, err)
	}
}

func FuzzUnframe(f *testing.F) {
	f.Add(frame(origin{node: 1, id: 2}, []byte("x")))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		o, payload, err := unframe(data)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(data) == 0 {
			return
		}
		if again := frame(o, payload); !bytes.Equal(again, data) {
			t.Fatalf("re-framing %x gave %x", data, again)
		}
	})
}

func TestFrameBatch_RoundTrip(t *testing.T) {
	props := []*Proposal{
		{origin: origin{node: 1, id: 10}, parts: [][]byte{[]byte("a")}},
		{origin: origin{node: 2, id: 11}, parts: [][]byte{[]byte("b"), bytes.Repeat([]byte("b"), 299)}},
		{origin: origin{node: 1, id: 12}, parts: [][]byte{[]byte("c")}},
	}
	var got []*Proposal
	err := eachPayload(frameBatch(props), func(o origin, p []byte) error {
		got = append(got, &Proposal{origin: o, parts: [][]byte{bytes.Clone(p)}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(props) {
		t.Fatalf("decoded %d payloads, want %d", len(got), len(props))
	}
	for i := range props {
		if got[i].origin != props[i].origin || !bytes.Equal(got[i].parts[0], bytes.Join(props[i].parts, nil)) {
			t.Errorf("payload %d: %+v, want %+v", i, got[i], props[i])
		}
	}
}

func FuzzEachPayload(f *testing.F) {
	f.Add(frameBatch([]*Proposal{{origin: origin{node: 1, id: 2}, parts: [][]byte{[]byte("x")}}, {origin: origin{node: 3, id: 4}, parts: [][]byte{[]byte("y"), []byte("z")}}}))
	f.Add(frame(origin{node: 1, id: 1}, []byte("single")))
	f.Add([]byte{frameBatchVersion, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		total := 0
		err := eachPayload(data, func(o origin, p []byte) error {
			total += len(p)
			if len(data) > 0 && o.node == 0 {
				t.Fatalf("decoded a zero origin from %x", data)
			}
			return nil
		})
		if err == nil && total > len(data) {
			t.Fatalf("payloads of %d bytes from %d bytes of input", total, len(data))
		}
		if err != nil && !errors.Is(err, ErrBadFrame) {
			t.Fatalf("error %v does not wrap ErrBadFrame", err)
		}
	})
}
