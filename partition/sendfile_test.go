package partition

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

func TestRange_WriteToSocketAndBuffer(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, t.TempDir(), cfg)
	want := fillLog(t, l, 50)
	var all []byte
	for _, b := range want {
		all = append(all, b...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const readers = 4
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			r, err := l.ReadRange(0, 1<<20, l.EndOffset())
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Release()
			if i%2 == 0 {
				n, handled, err := r.sendfile(c)
				if !handled || err != nil || n != int64(len(all)) {
					t.Errorf("sendfile = %d, %v, %v; want %d by sendfile", n, handled, err, len(all))
				}
				return
			}
			if n, err := r.WriteTo(c); err != nil || n != int64(len(all)) {
				t.Errorf("WriteTo(socket) = %d, %v; want %d", n, err, len(all))
			}
		}()
	}
	for range readers {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(c, int64(len(all))))
		c.Close()
		if err != nil || !bytes.Equal(got, all) {
			t.Fatalf("socket got %d bytes (%v), want the %d stored", len(got), err, len(all))
		}
	}
	wg.Wait()
	r, err := l.ReadRange(5, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if want, _ := r.AppendTo(nil); !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("copy path differs from AppendTo")
	}
}

func TestRange_OutlivesRetention(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	l := openLog(t, t.TempDir(), cfg)
	fillLog(t, l, 30)
	r, err := l.ReadRange(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.AppendTo(nil)
	if err := l.AdvanceStart(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	got, err := r.AppendTo(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("range over a deleted segment: %v", err)
	}
	r.Release()
	r.Release() // idempotent
}
