package partition

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func openISR(t testing.TB, dir string, cfg Config) *ISRLog {
	t.Helper()
	r, err := OpenISRLog(ISRLogConfig{Dir: dir, Log: cfg})
	if err != nil {
		t.Fatalf("OpenISRLog: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// produce appends batch as the leader of epoch, failing the test on a log
// error (a refusal is in the result).
func produce(t testing.TB, r *ISRLog, batch []byte, epoch int32) ProduceResult {
	t.Helper()
	info, err := ValidateBatch(batch, 1<<20)
	if err != nil {
		t.Fatalf("ValidateBatch: %v", err)
	}
	res, err := r.AppendLeader(batch, info, epoch)
	if err != nil {
		t.Fatalf("AppendLeader: %v", err)
	}
	return res
}

func mustProduce(t testing.TB, r *ISRLog, batch []byte, epoch int32) ProduceResult {
	t.Helper()
	res := produce(t, r, batch, epoch)
	if res.Err != nil || res.Duplicate {
		t.Fatalf("AppendLeader: %+v", res)
	}
	return res
}

// storedBatches returns every batch in r's log, as stored.
func storedBatches(t testing.TB, r *ISRLog) [][]byte {
	t.Helper()
	l := r.Log()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		bs := splitBatches(t, mustRead(t, l, off, 1<<20, l.EndOffset()))
		for _, b := range bs {
			info, _ := ParseBatchHeader(b)
			off = info.BaseOffset + int64(info.LastOffsetDelta) + 1
		}
		out = append(out, bs...)
	}
	return out
}

// catchUp copies every batch of leader that f lacks.
func catchUp(t testing.TB, f, leader *ISRLog) {
	t.Helper()
	for _, b := range storedBatches(t, leader) {
		info, _ := ParseBatchHeader(b)
		if info.BaseOffset < f.EndOffset() {
			continue
		}
		if err := f.AppendFollower(b); err != nil {
			t.Fatalf("AppendFollower at %d: %v", info.BaseOffset, err)
		}
	}
}

func TestISRLog_AppendLeaderDedup(t *testing.T) {
	r := openISR(t, t.TempDir(), testConfig())
	if err := r.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	var first []ProduceResult
	for seq := range int32(6) {
		first = append(first, mustProduce(t, r, idemBatch(t, 7, 0, 2*seq, "a", "b"), 1))
	}
	end := r.EndOffset()
	// The window holds the last five batches: sequences 2..11.
	for _, k := range []int{1, 3, 5} {
		res := produce(t, r, idemBatch(t, 7, 0, 2*int32(k), "a", "b"), 1)
		if !res.Duplicate || res.Base != first[k].Base || res.Last != first[k].Last {
			t.Fatalf("retry of batch %d: %+v, want a duplicate at [%d, %d]", k, res, first[k].Base, first[k].Last)
		}
	}
	if got := r.EndOffset(); got != end {
		t.Fatalf("duplicates moved the end from %d to %d", end, got)
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"retry outside the window", idemBatch(t, 7, 0, 0, "a", "b"), kerr.OutOfOrderSequenceNumber},
		{"gap in the sequence", idemBatch(t, 7, 0, 14, "a"), kerr.OutOfOrderSequenceNumber},
		{"older producer epoch", idemBatch(t, 7, -1, 12, "a"), kerr.InvalidProducerEpoch},
		{"new producer epoch not at 0", idemBatch(t, 7, 1, 5, "a"), kerr.OutOfOrderSequenceNumber},
	} {
		if res := produce(t, r, tc.batch, 1); res.Err != tc.want {
			t.Errorf("%s: %+v, want %v", tc.name, res, tc.want)
		}
	}
	if res := produce(t, r, plainBatch(t, "x"), 0); res.Err != kerr.FencedLeaderEpoch {
		t.Fatalf("append at a stale epoch: %+v, want FENCED_LEADER_EPOCH", res)
	}
	if got := r.EndOffset(); got != end {
		t.Fatalf("refused batches moved the end from %d to %d", end, got)
	}
	res := mustProduce(t, r, idemBatch(t, 7, 0, 12, "c"), 1)
	if res.Base != end {
		t.Fatalf("next in sequence at %d, want %d", res.Base, end)
	}
}

func TestISRLog_AppendFollower(t *testing.T) {
	leader := openISR(t, t.TempDir(), testConfig())
	f := openISR(t, t.TempDir(), testConfig())
	if err := leader.BecomeLeader(3); err != nil {
		t.Fatal(err)
	}
	for seq := range int32(3) {
		mustProduce(t, leader, idemBatch(t, 7, 0, seq, "a"), 3)
	}
	if err := leader.BecomeLeader(5); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, leader, idemBatch(t, 7, 0, 3, "b"), 5)
	mustProduce(t, leader, plainBatch(t, "c", "d"), 5)
	stored := storedBatches(t, leader)

	if err := f.AppendFollower(stored[1]); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("batch at 1 onto an empty log: %v, want ErrOffsetMismatch", err)
	}
	bad := stamped(stored[0], 0, 3)
	bad[len(bad)-1] ^= 1
	if err := f.AppendFollower(bad); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupted batch: %v, want ErrCorruptBatch", err)
	}
	if f.EndOffset() != 0 || f.Producer(7) != nil || len(f.Epochs()) != 0 {
		t.Fatal("a refused batch changed the follower")
	}
	catchUp(t, f, leader)
	if got, want := storedBatches(t, f), stored; !equalBatches(got, want) {
		t.Fatal("follower's log differs from the leader's")
	}
	if got, want := f.Epochs(), []EpochStart{{3, 0}, {5, 3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("follower epochs %v, want %v", got, want)
	}
	if got, want := f.Producer(7), leader.Producer(7); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower producer %+v, leader %+v", got, want)
	}
	if err := f.AppendFollower(stamped(stored[0], f.EndOffset(), 4)); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("batch of epoch 4 after epoch 5: %v, want ErrEpochRegression", err)
	}
}

func TestISRLog_TruncateRebuilds(t *testing.T) {
	dir := t.TempDir()
	r := openISR(t, dir, testConfig())
	if err := r.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	var res []ProduceResult
	for seq := range int32(4) { // offsets 0..3
		res = append(res, mustProduce(t, r, idemBatch(t, 7, 0, seq, "a"), 1))
	}
	if err := r.BecomeLeader(2); err != nil { // checkpoint at 4
		t.Fatal(err)
	}
	for seq := int32(4); seq < 8; seq++ { // offsets 4..7
		res = append(res, mustProduce(t, r, idemBatch(t, 7, 0, seq, "a"), 2))
	}
	if err := r.BecomeLeader(3); err != nil { // checkpoint at 8, the older one at 4
		t.Fatal(err)
	}
	res = append(res, mustProduce(t, r, idemBatch(t, 7, 0, 8, "a"), 3))
	if hw, err := r.SetHighWatermark(9); err != nil || hw != 9 {
		t.Fatalf("SetHighWatermark(9) = %d, %v", hw, err)
	}

	// Into the middle of producer 7's window, below the newest checkpoint.
	if err := r.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	wantState := func(seqs ...int) *ProducerState {
		st := &ProducerState{Epoch: 0}
		for _, s := range seqs {
			st.Batches = append(st.Batches, ProducerBatch{FirstSeq: int32(s), LastSeq: int32(s), BaseOffset: res[s].Base, LastOffset: res[s].Last, MaxTimestamp: 1000})
		}
		return st
	}
	check := func(when string, end int64, epochs []EpochStart, st *ProducerState) {
		t.Helper()
		if got := r.EndOffset(); got != end {
			t.Fatalf("%s: end %d, want %d", when, got, end)
		}
		if got := r.Epochs(); !reflect.DeepEqual(got, epochs) {
			t.Fatalf("%s: epochs %v, want %v", when, got, epochs)
		}
		if got := r.Producer(7); !reflect.DeepEqual(got, st) {
			t.Fatalf("%s: producer %+v, want %+v", when, got, st)
		}
	}
	check("truncated to 6", 6, []EpochStart{{1, 0}, {2, 4}}, wantState(1, 2, 3, 4, 5))
	if got := r.HighWatermark(); got != 6 {
		t.Fatalf("high watermark %d after truncating to 6, want 6", got)
	}
	if hw, _ := r.SetHighWatermark(4); hw != 6 {
		t.Fatalf("SetHighWatermark(4) lowered the high watermark to %d", hw)
	}
	if hw, _ := r.SetHighWatermark(100); hw != 6 {
		t.Fatalf("SetHighWatermark(100) = %d, want the LEO 6", hw)
	}
	if d := produce(t, r, idemBatch(t, 7, 0, 5, "a"), 3); !d.Duplicate || d.Base != 5 {
		t.Fatalf("retry of sequence 5 after the truncation: %+v, want a duplicate at 5", d)
	}
	if d := produce(t, r, idemBatch(t, 7, 0, 7, "a"), 3); d.Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("sequence 7 after the truncation: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", d)
	}

	// Below both checkpoints: rebuilt by a scan from the start.
	if err := r.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	check("truncated to 2", 2, []EpochStart{{1, 0}}, wantState(0, 1))

	// The state survives a restart: the checkpoints were rewritten.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openISR(t, dir, testConfig())
	check("reopened", 2, []EpochStart{{1, 0}}, wantState(0, 1))
}

func TestISRLog_EndOffsetFor(t *testing.T) {
	r := openISR(t, t.TempDir(), testConfig())
	for _, step := range []struct {
		epoch int32
		n     int
	}{{1, 4}, {2, 4}} {
		if err := r.BecomeLeader(step.epoch); err != nil {
			t.Fatal(err)
		}
		for range step.n {
			mustProduce(t, r, plainBatch(t, "v"), step.epoch)
		}
	}
	if _, err := r.SetHighWatermark(5); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		epoch       int32
		forConsumer bool
		wantEpoch   int32
		wantOffset  int64
	}{
		{2, false, 2, 8}, {2, true, 2, 5}, // the current epoch: LEO, or HW for consumers (KIP-392)
		{1, false, 1, 4}, {1, true, 1, 4},
		{0, false, 0, 0}, // older than every known epoch
		{3, false, -1, -1}, {3, true, -1, -1},
	} {
		e, off := r.EndOffsetFor(tc.epoch, tc.forConsumer)
		if e != tc.wantEpoch || off != tc.wantOffset {
			t.Errorf("EndOffsetFor(%d, %v) = (%d, %d), want (%d, %d)", tc.epoch, tc.forConsumer, e, off, tc.wantEpoch, tc.wantOffset)
		}
	}
	if err := r.BecomeLeader(1); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("BecomeLeader(1) after 2: %v, want FENCED_LEADER_EPOCH", err)
	}
}

func TestISRLog_ResetTo(t *testing.T) {
	dir := t.TempDir()
	r := openISR(t, dir, testConfig())
	if err := r.BecomeLeader(2); err != nil {
		t.Fatal(err)
	}
	for seq := range int32(3) {
		mustProduce(t, r, idemBatch(t, 7, 0, seq, "a"), 2)
	}
	if err := r.ResetTo(50); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		l := r.Log()
		if l.StartOffset() != 50 || r.EndOffset() != 50 || r.HighWatermark() != 50 {
			t.Fatalf("%s: start %d, end %d, hw %d; want 50 each", when, l.StartOffset(), r.EndOffset(), r.HighWatermark())
		}
		if r.Producer(7) != nil || len(r.Epochs()) != 0 {
			t.Fatalf("%s: producer %+v, epochs %v survive the reset", when, r.Producer(7), r.Epochs())
		}
	}
	check("after ResetTo")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openISR(t, dir, testConfig())
	r.SetHighWatermark(50)
	check("reopened")
	if err := r.AppendFollower(stamped(idemBatch(t, 7, 0, 9, "b"), 50, 4)); err != nil {
		t.Fatalf("AppendFollower at the new start: %v", err)
	}
	if got, want := r.Epochs(), []EpochStart{{4, 50}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
}

// An ISR log whose batch had its partitionLeaderEpoch flipped (outside
// the CRC) below its checkpoint is cut there at open and says it lost
// data; batches of an epoch newer than the leader's current one are cut
// by TruncateAboveEpoch, which says so too.
func TestISRLog_FlippedLeaderEpoch(t *testing.T) {
	fill := func(t *testing.T) (string, Config) {
		dir, cfg := t.TempDir(), testConfig()
		r, err := OpenISRLog(ISRLogConfig{Dir: dir, Log: cfg})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			mustProduce(t, r, plainBatch(t, "v"), int32(1+i/3))
		}
		if err := r.Close(); err != nil { // a checkpoint at the end
			t.Fatal(err)
		}
		return dir, cfg
	}
	t.Run("below the checkpoint", func(t *testing.T) {
		dir, cfg := fill(t)
		seg := segFile(dir, 0, logSuffix)
		flipByte(t, seg, batchPositions(t, seg)[4]+offLeaderEpoch+3) // epoch 2 becomes 66
		r := openISR(t, dir, cfg)
		if r.EndOffset() != 4 || !r.LostData() {
			t.Fatalf("end %d, lost data %v; want the log cut at 4 and lost data", r.EndOffset(), r.LostData())
		}
	})
	t.Run("raised above the next batch's, no checkpoint", func(t *testing.T) {
		dir, cfg := fill(t)
		for slot := range 2 {
			if err := os.Remove(isrCheckpointPath(dir, slot)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		seg := segFile(dir, 0, logSuffix)
		flipByte(t, seg, batchPositions(t, seg)[1]+offLeaderEpoch+3) // epoch 1 becomes 65, above batch 2's 1
		r := openISR(t, dir, cfg)
		if r.EndOffset() != 1 || !r.LostData() || r.LatestEpoch() != 1 {
			t.Fatalf("end %d, lost data %v, latest epoch %d; want the log cut at the raised batch 1", r.EndOffset(), r.LostData(), r.LatestEpoch())
		}
	})
	t.Run("newer than the leader's", func(t *testing.T) {
		dir, cfg := fill(t)
		r := openISR(t, dir, cfg)
		if cut, err := r.TruncateAboveEpoch(2); err != nil || cut || r.EndOffset() != 6 || r.LostData() {
			t.Fatalf("TruncateAboveEpoch(2) = %v, %v: end %d, lost %v; want nothing cut", cut, err, r.EndOffset(), r.LostData())
		}
		if cut, err := r.TruncateAboveEpoch(1); err != nil || !cut || r.EndOffset() != 3 || !r.LostData() || r.LatestEpoch() != 1 {
			t.Fatalf("TruncateAboveEpoch(1) = %v, %v: end %d, lost %v, latest epoch %d; want the epoch-2 batches cut", cut, err, r.EndOffset(), r.LostData(), r.LatestEpoch())
		}
	})
}
