package main

import "testing"

// TestStores_RoundTrip: both stores hand back every partition's state
// after a close and reopen, so the restart figures read what was written.
func TestStores_RoundTrip(t *testing.T) {
	for _, kind := range []string{"files", "badger"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := populate(kind, dir, 20, 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(3, make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = open(kind, dir, 20)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := s.ReadAll(20)
			if err != nil {
				t.Fatal(err)
			}
			if want := 19*64 + 100; got != want {
				t.Fatalf("read %d bytes, want %d", got, want)
			}
		})
	}
}

func TestOpen_UnknownStore(t *testing.T) {
	if _, err := open("sqlite", t.TempDir(), 1); err == nil {
		t.Fatal("an unknown store opened")
	}
}
