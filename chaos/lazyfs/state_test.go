package lazyfs

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// model is the obvious implementation: the durable bytes and the view.
type model struct{ durable, view []byte }

func (m *model) write(data []byte, off int64) {
	if end := off + int64(len(data)); end > int64(len(m.view)) {
		m.view = append(m.view, make([]byte, end-int64(len(m.view)))...)
	}
	copy(m.view[off:], data)
}

func (m *model) truncate(n int64) {
	if n <= int64(len(m.view)) {
		m.view = m.view[:n:n]
		return
	}
	m.view = append(m.view, make([]byte, n-int64(len(m.view)))...)
}

func (m *model) sync() { m.durable = bytes.Clone(m.view) }
func (m *model) lose() { m.view = bytes.Clone(m.durable) }

// newTestState returns a state over a fresh backing file holding initial.
func newTestState(t testing.TB, initial []byte) *fileState {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, initial, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s, err := newFileState(1, f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkState compares the state's view and its backing file with the model.
func checkState(t testing.TB, s *fileState, m *model) {
	t.Helper()
	if s.size != int64(len(m.view)) {
		t.Fatalf("size = %d, want %d", s.size, len(m.view))
	}
	got := make([]byte, len(m.view)+pageSize)
	n, err := s.readAt(got, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:n], m.view) {
		t.Fatalf("view differs from model (len %d vs %d)", n, len(m.view))
	}
	backing, err := os.ReadFile(s.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(backing, m.durable) {
		t.Fatalf("backing file (len %d) differs from durable model (len %d)", len(backing), len(m.durable))
	}
}

// runOps interprets data as a sequence of operations on both the state and
// the model: 1 byte opcode, then operands.
func runOps(t testing.TB, initial, data []byte) {
	s := newTestState(t, initial)
	m := &model{durable: bytes.Clone(initial), view: bytes.Clone(initial)}
	for len(data) >= 5 {
		op, off, arg := data[0]%5, int64(binary.LittleEndian.Uint16(data[1:3]))%(5*pageSize), int(data[3])
		data = data[5:]
		switch op {
		case 0: // write arg*37 bytes of a pattern
			buf := bytes.Repeat([]byte{data4(arg)}, arg*37)
			if err := s.writeAt(buf, off); err != nil {
				t.Fatal(err)
			}
			m.write(buf, off)
		case 1:
			s.truncate(off)
			m.truncate(off)
		case 2:
			if err := s.commit(false); err != nil {
				t.Fatal(err)
			}
			m.sync()
		case 3:
			if _, err := s.lose(); err != nil {
				t.Fatal(err)
			}
			m.lose()
		case 4:
			buf := make([]byte, arg*53)
			n, err := s.readAt(buf, off)
			if err != nil {
				t.Fatal(err)
			}
			want := []byte{}
			if off < int64(len(m.view)) {
				want = m.view[off:min(int64(len(m.view)), off+int64(len(buf)))]
			}
			if !bytes.Equal(buf[:n], want) {
				t.Fatalf("read at %d: got %d bytes, want %d, or contents differ", off, n, len(want))
			}
		}
		checkState(t, s, m)
	}
}

func data4(arg int) byte { return byte(arg*7 + 1) }

// FuzzFileState checks the overlay against the model for any sequence of
// writes, truncations, fsyncs, power losses and reads.
func FuzzFileState(f *testing.F) {
	f.Add([]byte("hello"), []byte{0, 10, 0, 20, 0, 2, 0, 0, 0, 0, 0, 0, 40, 3, 0, 3, 0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{9}, 9000), []byte{1, 100, 0, 0, 0, 0, 0, 32, 50, 0, 3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0})
	f.Add([]byte{}, []byte{1, 0, 64, 0, 0, 4, 0, 0, 255, 0, 2, 0, 0, 0, 0, 0, 5, 16, 9, 0})
	f.Fuzz(func(t *testing.T, initial, ops []byte) {
		if len(initial) > 3*pageSize || len(ops) > 400 {
			return
		}
		runOps(t, initial, ops)
	})
}

func TestFileState_TruncateThenGrowShowsZeros(t *testing.T) {
	s := newTestState(t, bytes.Repeat([]byte{'x'}, 3*pageSize))
	s.truncate(10)
	s.truncate(2 * pageSize)
	got := make([]byte, 2*pageSize)
	if _, err := s.readAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte{'x'}, 10), make([]byte, 2*pageSize-10)...)
	if !bytes.Equal(got, want) {
		t.Fatal("bytes cut by a truncation came back when the file grew again")
	}
}

func TestFileState_LoseRevertsToLastCommit(t *testing.T) {
	s := newTestState(t, nil)
	if err := s.writeAt([]byte("synced"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(false); err != nil {
		t.Fatal(err)
	}
	if err := s.writeAt([]byte("SYNCED and more"), 0); err != nil {
		t.Fatal(err)
	}
	dropped, err := s.lose()
	if err != nil {
		t.Fatal(err)
	}
	if dropped != pageSize {
		t.Errorf("dropped = %d, want one page", dropped)
	}
	checkState(t, s, &model{durable: []byte("synced"), view: []byte("synced")})
}

func TestFileState_WritebackDueAgesFromTheFirstUnsyncedChange(t *testing.T) {
	s := newTestState(t, nil)
	age := 30 * time.Second
	if s.writebackDue(time.Now().Add(time.Hour), age) {
		t.Fatal("a clean file is due for writeback")
	}
	if err := s.writeAt([]byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	first := s.dirtiedAt
	if first.IsZero() {
		t.Fatal("a write did not start the dirty clock")
	}
	if err := s.writeAt([]byte("b"), 1); err != nil {
		t.Fatal(err)
	}
	if s.dirtiedAt != first {
		t.Error("a second write restarted the dirty clock (Linux ages an inode from its first dirtying)")
	}
	if s.writebackDue(first.Add(age-time.Millisecond), age) || !s.writebackDue(first.Add(age), age) {
		t.Errorf("due before %s or not at it", age)
	}
	if err := s.commit(false); err != nil {
		t.Fatal(err)
	}
	if !s.dirtiedAt.IsZero() || s.writebackDue(first.Add(time.Hour), age) {
		t.Error("a committed file is still due")
	}
	s.truncate(s.size) // no change: stays clean
	if !s.dirtiedAt.IsZero() {
		t.Error("a truncation to the same size started the dirty clock")
	}
	s.truncate(1)
	if s.dirtiedAt.IsZero() {
		t.Error("a shrinking truncation did not start the dirty clock")
	}
	if _, err := s.lose(); err != nil {
		t.Fatal(err)
	}
	if !s.dirtiedAt.IsZero() {
		t.Error("a loss left the dirty clock running")
	}
}
