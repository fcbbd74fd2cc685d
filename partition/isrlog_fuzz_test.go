package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// isrModelBatch is one batch of the model log.
type isrModelBatch struct {
	base, last      int64
	epoch           int32
	pid             int64
	pepoch          int16
	firstSeq, nrecs int32
}

// isrModel is the plainest statement of what an ISRLog holds: a list of
// batches, epoch starts kept as a filtered list, and a high watermark.
type isrModel struct {
	batches []isrModelBatch
	epochs  []EpochStart
	hw      int64
}

func (m *isrModel) end() int64 {
	if len(m.batches) == 0 {
		return 0
	}
	return m.batches[len(m.batches)-1].last + 1
}

func (m *isrModel) latest() int32 {
	if len(m.epochs) == 0 {
		return -1
	}
	return m.epochs[len(m.epochs)-1].Epoch
}

// startEpoch drops the starts the new one contradicts and adds it.
func (m *isrModel) startEpoch(epoch int32, at int64) {
	var keep []EpochStart
	for _, e := range m.epochs {
		if e.Epoch < epoch && e.StartOffset < at {
			keep = append(keep, e)
		}
	}
	m.epochs = append(keep, EpochStart{epoch, at})
}

// window is the producer's state: the trailing run of its batches with
// one producer epoch, the last five of them.
func (m *isrModel) window(pid int64) []isrModelBatch {
	var run []isrModelBatch
	for _, b := range m.batches {
		if b.pid != pid {
			continue
		}
		if len(run) > 0 && run[0].pepoch != b.pepoch {
			run = nil
		}
		run = append(run, b)
	}
	return run[max(0, len(run)-5):]
}

func (m *isrModel) producers() map[int64]*ProducerState {
	out := map[int64]*ProducerState{}
	for _, b := range m.batches {
		if b.pid < 0 || out[b.pid] != nil {
			continue
		}
		w := m.window(b.pid)
		st := &ProducerState{Epoch: w[0].pepoch}
		for _, x := range w {
			st.Batches = append(st.Batches, ProducerBatch{FirstSeq: x.firstSeq, LastSeq: x.firstSeq + x.nrecs - 1, BaseOffset: x.base, LastOffset: x.last, MaxTimestamp: 1000})
		}
		out[b.pid] = st
	}
	return out
}

// produceOutcome is what a leader append of the batch must do: append,
// or answer a duplicate's offsets, or refuse with a Kafka error.
func (m *isrModel) produceOutcome(b isrModelBatch) (dup *isrModelBatch, err error) {
	w := m.window(b.pid)
	if b.pid < 0 || len(w) == 0 {
		return nil, nil
	}
	last := w[len(w)-1]
	switch {
	case b.pepoch < last.pepoch:
		return nil, kerr.InvalidProducerEpoch
	case b.pepoch > last.pepoch && b.firstSeq != 0:
		return nil, kerr.OutOfOrderSequenceNumber
	case b.pepoch > last.pepoch:
		return nil, nil
	}
	for i := range w {
		if w[i].firstSeq == b.firstSeq && w[i].nrecs == b.nrecs {
			return &w[i], nil
		}
	}
	if b.firstSeq != last.firstSeq+last.nrecs {
		return nil, kerr.OutOfOrderSequenceNumber
	}
	return nil, nil
}

func (m *isrModel) truncate(off int64) {
	if off >= m.end() {
		var keep []EpochStart
		for _, e := range m.epochs {
			if e.StartOffset < off {
				keep = append(keep, e)
			}
		}
		m.epochs = keep
		return
	}
	i := 0
	for i < len(m.batches) && m.batches[i].last < off {
		i++
	}
	m.batches = m.batches[:i]
	var keep []EpochStart
	for _, e := range m.epochs {
		if e.StartOffset < m.end() {
			keep = append(keep, e)
		}
	}
	m.epochs, m.hw = keep, min(m.hw, m.end())
}

// isrModelRun replays one op sequence against an ISRLog and the model.
type isrModelRun struct {
	t   testing.TB
	dir string
	r   *ISRLog
	m   isrModel
}

func (x *isrModelRun) batch(b isrModelBatch) []byte {
	vals := make([]string, b.nrecs)
	for i := range vals {
		vals[i] = fmt.Sprint(b.firstSeq + int32(i))
	}
	return idemBatch(x.t, b.pid, b.pepoch, b.firstSeq, vals...)
}

func (x *isrModelRun) open() {
	r, err := OpenISRLog(ISRLogConfig{Dir: x.dir, Log: testConfig()})
	if err != nil {
		x.t.Fatalf("OpenISRLog: %v", err)
	}
	x.r = r
}

func runISRModel(t testing.TB, ops []byte) {
	x := &isrModelRun{t: t, dir: t.TempDir()}
	x.open()
	defer func() { _ = x.r.Close() }()
	for i := 0; i+1 < len(ops); i += 2 {
		desc := x.op(ops[i]%6, ops[i+1])
		x.check(fmt.Sprintf("op %d (%s)", i/2, desc))
	}
}

func (x *isrModelRun) op(kind, arg byte) string {
	switch kind {
	case 0:
		return x.produce(arg)
	case 1:
		return x.followerAppend(arg)
	case 2:
		off := int64(arg) % (x.m.end() + 2)
		if err := x.r.TruncateTo(off); err != nil {
			x.t.Fatal(err)
		}
		x.m.truncate(off)
		return fmt.Sprintf("truncate %d", off)
	case 3:
		e := x.m.latest() + 1
		if err := x.r.BecomeLeader(e); err != nil {
			x.t.Fatal(err)
		}
		x.m.startEpoch(e, x.m.end())
		return fmt.Sprintf("lead %d", e)
	case 4:
		hw := int64(arg) % (x.m.end() + 3)
		if _, err := x.r.SetHighWatermark(hw); err != nil {
			x.t.Fatal(err)
		}
		x.m.hw = max(x.m.hw, min(hw, x.m.end()))
		return fmt.Sprintf("hw %d", hw)
	}
	if err := x.r.Close(); err != nil {
		x.t.Fatal(err)
	}
	x.open()
	x.m.hw = 0
	return "reopen"
}

// produce appends as the leader: a producer's next batch, a retry, a gap,
// an older or newer producer epoch, or a leader epoch gone stale.
func (x *isrModelRun) produce(arg byte) string {
	if x.m.latest() < 0 {
		x.op(3, 0)
	}
	b := isrModelBatch{pid: int64(arg%4) - 1, nrecs: 1 + int32(arg>>2%3), base: x.m.end()}
	if w := x.m.window(b.pid); b.pid >= 0 && len(w) > 0 {
		last := w[len(w)-1]
		b.pepoch, b.firstSeq = last.pepoch, last.firstSeq+last.nrecs
		switch arg >> 4 % 8 {
		case 0, 1:
			r := w[int(arg>>5)%len(w)]
			b.firstSeq, b.nrecs = r.firstSeq, r.nrecs
		case 2:
			b.firstSeq++
		case 3:
			b.pepoch++
			b.firstSeq = int32(arg >> 7)
		case 4:
			b.pepoch--
		}
	}
	epoch := x.m.latest()
	if arg == 255 && epoch > 0 {
		epoch-- // a deposed leader
	}
	res := produce(x.t, x.r, x.batch(b), epoch)
	dup, err := x.m.produceOutcome(b)
	if epoch < x.m.latest() {
		dup, err = nil, kerr.FencedLeaderEpoch
	}
	switch {
	case err != nil:
		if res.Err != err {
			x.t.Fatalf("produce %+v: %+v, want %v", b, res, err)
		}
	case dup != nil:
		if !res.Duplicate || res.Base != dup.base || res.Last != dup.last {
			x.t.Fatalf("produce %+v: %+v, want a duplicate of %+v", b, res, *dup)
		}
	default:
		b.last, b.epoch = b.base+int64(b.nrecs)-1, epoch
		if res.Err != nil || res.Duplicate || res.Base != b.base || res.Last != b.last {
			x.t.Fatalf("produce %+v: %+v, want it appended", b, res)
		}
		x.m.batches = append(x.m.batches, b)
	}
	return fmt.Sprintf("produce %+v at epoch %d", b, epoch)
}

// followerAppend copies a batch "from a leader": at the end, of the
// current or a newer epoch; sometimes at a wrong offset or an older epoch.
func (x *isrModelRun) followerAppend(arg byte) string {
	b := isrModelBatch{pid: 3 + int64(arg%2), pepoch: int16(arg >> 1 % 2), firstSeq: int32(arg >> 2), nrecs: 1 + int32(arg%3), base: x.m.end()}
	b.last = b.base + int64(b.nrecs) - 1
	b.epoch = max(x.m.latest(), 0) + int32(arg>>6%2)
	var want error
	switch {
	case arg%7 == 0:
		b.base++
		want = ErrOffsetMismatch
	case arg%11 == 0 && x.m.latest() > 0:
		b.epoch = x.m.latest() - 1
		want = ErrEpochRegression
	}
	err := x.r.AppendFollower(stamped(x.batch(b), b.base, b.epoch))
	if !errors.Is(err, want) || (want == nil) != (err == nil) {
		x.t.Fatalf("follower append %+v: %v, want %v", b, err, want)
	}
	if want == nil {
		if b.epoch > x.m.latest() {
			x.m.startEpoch(b.epoch, b.base)
		}
		x.m.batches = append(x.m.batches, b)
	}
	return fmt.Sprintf("follow %+v", b)
}

func (x *isrModelRun) check(when string) {
	r, m := x.r, &x.m
	if got, want := r.EndOffset(), m.end(); got != want {
		x.t.Fatalf("%s: end %d, model %d", when, got, want)
	}
	if got, want := r.HighWatermark(), m.hw; got != want {
		x.t.Fatalf("%s: high watermark %d, model %d", when, got, want)
	}
	if got, want := r.Epochs(), m.epochs; !(len(got) == 0 && len(want) == 0) && !reflect.DeepEqual(got, want) {
		x.t.Fatalf("%s: epochs %v, model %v", when, got, want)
	}
	if got, want := r.producers, m.producers(); !reflect.DeepEqual(got, want) {
		x.t.Fatalf("%s: producers\n%s\nmodel\n%s", when, dumpProducers(got), dumpProducers(want))
	}
	for q := int32(-1); q <= m.latest()+1; q++ {
		e, off := r.EndOffsetFor(q, false)
		we, woff := m.endOffsetFor(q)
		if e != we || off != woff {
			x.t.Fatalf("%s: EndOffsetFor(%d) = (%d, %d), model (%d, %d)", when, q, e, off, we, woff)
		}
		if _, coff := r.EndOffsetFor(q, true); coff != min(woff, m.hw) && woff >= 0 {
			x.t.Fatalf("%s: consumer EndOffsetFor(%d) = %d, want min(%d, hw %d)", when, q, coff, woff, m.hw)
		}
	}
}

// endOffsetFor is OffsetForLeaderEpoch over the model: the LEO for the
// newest epoch; else the start of the first epoch above q, answered with
// the newest epoch at or below q (q itself when none is).
func (m *isrModel) endOffsetFor(q int32) (int32, int64) {
	if q < 0 || len(m.epochs) == 0 || q > m.latest() {
		return -1, -1
	}
	if q == m.latest() {
		return q, m.end()
	}
	at := q
	for _, e := range m.epochs {
		if e.Epoch > q {
			return at, e.StartOffset
		}
		at = e.Epoch
	}
	panic("unreachable")
}

func TestISRLog_Model(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 30
	}
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		ops := make([]byte, 2*(20+rng.IntN(60)))
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		runISRModel(t, ops)
	}
}

// FuzzISRLog replays arbitrary sequences of leader appends (with retries,
// gaps and producer epoch changes), follower appends (with wrong offsets
// and older epochs), truncations, leader changes, high-watermark moves and
// restarts against isrModel.
func FuzzISRLog(f *testing.F) {
	f.Add([]byte{0, 4, 0, 8, 0, 12, 0, 0, 2, 1, 0, 16, 5, 0, 0, 32})
	f.Add([]byte{3, 0, 0, 1, 1, 64, 1, 3, 2, 2, 0, 2, 4, 9, 0, 255, 5, 0})
	f.Add([]byte{0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 21, 0, 53, 2, 3, 0, 37, 0, 5})
	f.Add([]byte{1, 7, 1, 11, 3, 0, 1, 65, 1, 11, 2, 0, 5, 0, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		runISRModel(t, ops)
	})
}
