package txns

import (
	"errors"
	"reflect"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/raftgroup"
)

func TestMachine_ApplyGarbage(t *testing.T) {
	h := newHarness(t)
	h.ongoing("a")
	before := h.snapshot()
	for _, data := range [][]byte{
		[]byte("not a command"),
		[]byte("G{\"barrier\":{\"term\":1}}"), // a group command
		[]byte("T"),
		[]byte("T{}"),
		[]byte("T{\"barrier\":{\"term\":9},\"tick\":{\"now_ms\":1}}"),
		[]byte("T{\"tick\":\"x\"}"),
		{'T', 0xff, 0x00},
	} {
		v, err := h.m.Apply(raftgroup.Entry{Index: 99, Data: data})
		if err != nil {
			t.Fatalf("apply %q: %v", data, err)
		}
		if r, ok := v.(Result); !ok || r.Code != kerr.InvalidRequest.Code {
			t.Fatalf("apply %q: %+v, want INVALID_REQUEST", data, v)
		}
	}
	if v, err := h.m.Apply(raftgroup.Entry{Index: 100}); v != nil || err != nil {
		t.Fatalf("a leader's empty entry: %v %v", v, err)
	}
	if h.snapshot() != before {
		t.Fatal("garbage changed the state")
	}
}

func TestDecodeCommand(t *testing.T) {
	c := &Command{EndTxn: &EndTxn{TransactionalID: "a", ProducerID: 3, ProducerEpoch: 1, Commit: true, NowMs: 5}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"", "x", "T", "T{}", "Tnull", `T{"end_txn":{},"tick":{}}`} {
		if _, err := DecodeCommand([]byte(bad)); !errors.Is(err, ErrNotCommand) {
			t.Fatalf("decode %q: %v, want ErrNotCommand", bad, err)
		}
	}
}

func TestMachine_DescribeAndList(t *testing.T) {
	h := newHarness(t)
	pe, _ := h.producer("empty")
	h.now += 10
	po, eo := h.ongoing("ongoing")
	startO := h.now
	h.now += 1000
	pc, ec := h.ongoing("commit")
	h.end("commit", pc, ec, true)
	h.now += 500

	if _, code := h.m.Describe(""); code != kerr.InvalidRequest.Code {
		t.Fatalf("describe of an empty id: %d", code)
	}
	if _, code := h.m.Describe("none"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe of an unknown id: %d", code)
	}
	d, code := h.m.Describe("ongoing")
	if code != 0 || d.ProducerID != po || d.ProducerEpoch != eo || d.State != StateOngoing || d.StartMs != startO ||
		d.TimeoutMs != timeout || !reflect.DeepEqual(d.Partitions, Partitions{"t": {0, 1}}) {
		t.Fatalf("describe: %+v %d", d, code)
	}
	d.Partitions["t"][0] = 99 // a copy: the machine is untouched
	if h.txn("ongoing").Partitions["t"][0] != 0 {
		t.Fatal("describe handed out the machine's own partitions")
	}

	ids := func(ts []*Txn) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	d1000, d1499, d2000 := int64(1000), int64(1499), int64(2000)
	for _, tc := range []struct {
		name string
		f    ListFilter
		want []string
	}{
		{"all", ListFilter{}, []string{"commit", "empty", "ongoing"}},
		{"states", ListFilter{States: []State{StateOngoing, StatePrepareCommit}}, []string{"commit", "ongoing"}},
		{"dead matches nothing", ListFilter{States: []State{StateDead}}, nil},
		{"producer ids", ListFilter{ProducerIDs: []int64{pe, pc}}, []string{"commit", "empty"}},
		{"both", ListFilter{States: []State{StateEmpty}, ProducerIDs: []int64{pc}}, nil},
		{"running longer than 1000ms", ListFilter{MinDurationMs: &d1000, NowMs: h.now}, []string{"ongoing"}},
		{"running longer than 1499ms", ListFilter{MinDurationMs: &d1499, NowMs: h.now}, []string{"ongoing"}},
		{"running longer than 2000ms", ListFilter{MinDurationMs: &d2000, NowMs: h.now}, nil},
		{"id pattern", ListFilter{IDPattern: regexp.MustCompile("^(em|co)")}, []string{"commit", "empty"}},
	} {
		if got := ids(h.m.List(tc.f)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMachine_SnapshotRestoreRefusesMalformed(t *testing.T) {
	for _, data := range []string{
		`not json`,
		`{"txns":{"a":null}}`,
		`{"txns":{"a":{"id":"b","state":"Empty"}}}`,
		`{"txns":{"a":{"id":"a","state":"Dead"}}}`,
		`{"txns":{"a":{"id":"a","state":"Sideways"}}}`,
		`{"txns":{"a":{"id":"a","state":"Ongoing","partitions":{"t":[-1]}}}}`,
		`{"txns":{"a":{"id":"a","state":"Ongoing","groups":["b","a"]}}}`,
		`{"txns":{"a":{"id":"a","state":"Ongoing","groups":["a","a"]}}}`,
		`{"txns":{},"free":[{"start":5,"count":10}],"granted":10}`,
		`{"txns":{},"free":[{"start":5,"count":0}],"granted":10}`,
	} {
		m := NewMachine()
		if err := m.Restore(&raftpb.Snapshot{Data: []byte(data)}); err == nil {
			t.Errorf("restored %s", data)
		}
	}
	m := NewMachine()
	if err := m.Restore(&raftpb.Snapshot{}); err != nil || len(m.Txns()) != 0 {
		t.Fatalf("restore of an empty snapshot: %v", err)
	}
}

func TestClientCode(t *testing.T) {
	fenced, old := kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code
	for _, tc := range []struct {
		code, key, version, want int16
	}{
		{fenced, int16(kmsg.InitProducerID), 3, old},
		{fenced, int16(kmsg.InitProducerID), 4, fenced},
		{fenced, int16(kmsg.AddPartitionsToTxn), 1, old},
		{fenced, int16(kmsg.AddPartitionsToTxn), 2, fenced},
		{fenced, int16(kmsg.AddOffsetsToTxn), 1, old},
		{fenced, int16(kmsg.EndTxn), 0, old},
		{fenced, int16(kmsg.EndTxn), 5, fenced},
		{kerr.ConcurrentTransactions.Code, int16(kmsg.EndTxn), 0, kerr.ConcurrentTransactions.Code},
		{fenced, int16(kmsg.Produce), 0, fenced},
	} {
		if got := ClientCode(tc.code, tc.key, tc.version); got != tc.want {
			t.Errorf("ClientCode(%d, key %d, v%d) = %d, want %d", tc.code, tc.key, tc.version, got, tc.want)
		}
	}
}

func TestPartitionFor(t *testing.T) {
	// Java: "my-txn".hashCode() is -1061187895, so partition 45 of 50.
	if got := PartitionFor("my-txn", 50); got != 45 {
		t.Fatalf("PartitionFor(my-txn, 50) = %d, want 45", got)
	}
	for _, id := range []string{"", "a", "my-txn", "transactional-id-\u00e9\U0001F600"} {
		for _, n := range []int32{1, 3, 50} {
			if got, want := PartitionFor(id, n), groups.PartitionFor(id, n); got != want {
				t.Fatalf("PartitionFor(%q, %d) = %d, groups says %d", id, n, got, want)
			}
		}
	}
}
