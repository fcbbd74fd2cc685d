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
