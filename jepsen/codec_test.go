package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHistory_JSONLRoundTrip(t *testing.T) {
	h := clean().h
	var buf bytes.Buffer
	if err := writeJSONL(&buf, h); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(buf.String(), "\n"), len(h); got != want {
		t.Fatalf("%d lines, want %d", got, want)
	}
	back, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(back), normalize(h)) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back, h)
	}
}

// normalize maps empty slices to nil so that DeepEqual compares content.
func normalize(h History) History {
	out := make(History, len(h))
	for i, op := range h {
		for _, s := range []*[]string{&op.Topics} {
			if len(*s) == 0 {
				*s = nil
			}
		}
		if len(op.Reads) == 0 {
			op.Reads = nil
		}
		if len(op.Seeks) == 0 {
			op.Seeks = nil
		}
		if len(op.Rebalanced) == 0 {
			op.Rebalanced = nil
		}
		reads := make([]PartitionRead, len(op.Reads))
		for j, r := range op.Reads {
			if len(r.Records) == 0 {
				r.Records = nil
			}
			reads[j] = r
		}
		if op.Reads != nil {
			op.Reads = reads
		}
		out[i] = op
	}
	return out
}

func TestRecord_EncodesAsPair(t *testing.T) {
	b, err := Record{Offset: 7, Value: "p3-000123"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[7,"p3-000123"]`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var r Record
	for _, bad := range []string{`[1]`, `[1,"a",2]`, `{"o":1}`, `["x","a"]`, `[1,2]`} {
		if err := r.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
}

func TestReadHistory_Errors(t *testing.T) {
	good := `{"index":0,"time":5,"type":"invoke","process":0,"f":"poll"}`
	cases := map[string]string{
		"not json":             `{"index":0`,
		"unknown type":         `{"index":0,"time":5,"type":"maybe","process":0,"f":"poll"}`,
		"unknown f":            `{"index":0,"time":5,"type":"invoke","process":0,"f":"dance"}`,
		"index gap":            good + "\n" + `{"index":2,"time":6,"type":"ok","process":0,"f":"poll"}`,
		"time backwards":       good + "\n" + `{"index":1,"time":4,"type":"ok","process":0,"f":"poll"}`,
		"send without value":   `{"index":0,"time":5,"type":"invoke","process":0,"f":"send"}`,
		"ok send no offset":    `{"index":0,"time":5,"type":"ok","process":0,"f":"send","send":{"topic":"t","partition":0,"key":"k","value":"v","offset":-1}}`,
		"nemesis as client":    `{"index":0,"time":5,"type":"invoke","process":3,"f":"start","nemesis":"kill"}`,
		"client as nemesis":    `{"index":0,"time":5,"type":"invoke","process":-1,"f":"poll"}`,
		"nemesis without name": `{"index":0,"time":5,"type":"invoke","process":-1,"f":"start"}`,
		"negative record":      `{"index":0,"time":5,"type":"ok","process":0,"f":"poll","reads":[{"topic":"t","partition":0,"records":[[-4,"v"]],"hw":1}]}`,
		"bad record":           `{"index":0,"time":5,"type":"ok","process":0,"f":"poll","reads":[{"topic":"t","partition":0,"records":[[1]],"hw":1}]}`,
		"final of two":         `{"index":0,"time":5,"type":"invoke","process":0,"f":"final-read","reads":[{"topic":"t","partition":0,"hw":-1},{"topic":"t","partition":1,"hw":-1}]}`,
		"negative seek":        `{"index":0,"time":5,"type":"invoke","process":0,"f":"assign","seeks":[{"topic":"t","partition":0,"offset":-2}]}`,
		"negative time":        `{"index":0,"time":-5,"type":"invoke","process":0,"f":"poll"}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := ReadHistory(strings.NewReader(in))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %v, want a *DecodeError", err)
			}
			if de.Line != len(h)+1 {
				t.Errorf("line %d with %d ops decoded before it", de.Line, len(h))
			}
		})
	}
}

func TestReadHistory_SkipsBlankLinesAndAcceptsNoTrailingNewline(t *testing.T) {
	in := "\n" + `{"index":0,"time":5,"type":"invoke","process":0,"f":"poll"}` + "\n\n" +
		`{"index":1,"time":6,"type":"ok","process":0,"f":"poll"}`
	h, err := ReadHistory(strings.NewReader(in))
	if err != nil || len(h) != 2 {
		t.Fatalf("%d ops, err %v", len(h), err)
	}
}

func TestRecorder_ConcurrentOpsAreOrderedAndStreamed(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				inv := r.Invoke(Op{Process: p, F: FSend, Send: &SendValue{Topic: "t", Value: fmt.Sprintf("p%d-%06d", p, i), Offset: NoOffset}})
				c := inv.Completion(OK)
				c.Send.Offset = int64(i)
				r.Complete(c)
				if inv.Send.Offset != NoOffset {
					t.Errorf("completion changed the invocation's value")
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	h := r.History()
	if len(h) != 800 {
		t.Fatalf("%d ops", len(h))
	}
	streamed, err := ReadHistory(&buf) // checks indexes count up and times never go back
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(streamed), normalize(h)) {
		t.Fatal("streamed history differs from the in-memory one")
	}
	if _, err := pairOps(h); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRecorder_WriteErrorIsReportedAndOpsKept(t *testing.T) {
	r := NewRecorder(failWriter{})
	for range 2000 { // more than the buffer holds
		r.Record(Op{Type: Invoke, F: FPoll})
	}
	if err := r.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("flush err %v", err)
	}
	if len(r.History()) != 2000 {
		t.Fatal("ops lost")
	}
}

func FuzzReadHistory(f *testing.F) {
	var buf bytes.Buffer
	if err := writeJSONL(&buf, clean().h); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"index":0,"time":5,"type":"ok","process":0,"f":"poll","reads":[{"topic":"t","partition":0,"records":[[1,"a"]],"hw":1}]}`))
	f.Add([]byte(`{"index":0,"time":5,"type":"invoke","process":-1,"f":"start","nemesis":"kill"}` + "\n"))
	buf.Reset()
	if err := writeJSONL(&buf, cleanTxn().h); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"index":0,"time":5,"type":"ok","process":0,"f":"txn","txn":{"id":"x","sends":[{"topic":"t","partition":0,"key":"k","value":"a","offset":0}],"end_start":3},"reads":[{"topic":"t","partition":1,"records":[[2,"b"]],"hw":4}]}`))
	f.Add([]byte("\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHistory(bytes.NewReader(data))
		if err != nil {
			if !errors.As(err, new(*DecodeError)) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := writeJSONL(&out, h); err != nil {
			t.Fatal(err)
		}
		back, err := ReadHistory(&out)
		if err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(h)) {
			t.Fatalf("round trip differs")
		}
		// Checking a decoded history must never panic; malformed pairings
		// are errors.
		cfg := DefaultCheckConfig()
		cfg.LinearizabilityTimeout = 100 * time.Millisecond
		if _, err := Check(h, cfg); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("check: %v", err)
		}
	})
}

// writeJSONL writes h as a Recorder streams history.jsonl: one writeOp a
// line.
func writeJSONL(w io.Writer, h History) error {
	for i := range h {
		if err := writeOp(w, &h[i]); err != nil {
			return err
		}
	}
	return nil
}
