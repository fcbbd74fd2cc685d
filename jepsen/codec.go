package jepsen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one encoded operation. A final read of a large
// partition is one line, so the bound is generous; it exists so that a
// corrupt file cannot make the decoder allocate without end.
const MaxLineBytes = 256 << 20

// ErrMalformed is wrapped by every error about a history's content.
var ErrMalformed = errors.New("jepsen: malformed history")

// DecodeError reports the line (from 1) of history.jsonl that failed.
type DecodeError struct {
	Line int
	Err  error
}

func (e *DecodeError) Error() string { return fmt.Sprintf("history line %d: %s", e.Line, e.Err) }

func (e *DecodeError) Unwrap() error { return e.Err }

// MarshalJSON encodes a record as [offset, value].
func (r Record) MarshalJSON() ([]byte, error) {
	v, err := json.Marshal(r.Value)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "[%d,%s]", r.Offset, v), nil
}

// UnmarshalJSON decodes [offset, value].
func (r *Record) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("record has %d elements, want [offset, value]: %w", len(pair), ErrMalformed)
	}
	if err := json.Unmarshal(pair[0], &r.Offset); err != nil {
		return fmt.Errorf("record offset: %w", err)
	}
	if err := json.Unmarshal(pair[1], &r.Value); err != nil {
		return fmt.Errorf("record value: %w", err)
	}
	return nil
}

// writeOp writes op as one JSON line: the history.jsonl format.
func writeOp(w io.Writer, op *Op) error {
	b, err := json.Marshal(op)
	if err != nil {
		return fmt.Errorf("encode op %d: %w", op.Index, err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write op %d: %w", op.Index, err)
	}
	return nil
}

// ReadHistory decodes JSON lines written by a Recorder (writeOp). Blank
// lines are skipped. Every op must be well formed (see Op.Check), indexes
// must count up from 0 and times must not go backwards. A history cut off
// mid-run (invocations without completions) decodes fine; Check treats the
// open invocations as info.
func ReadHistory(r io.Reader) (History, error) {
	br := bufio.NewReader(r)
	var h History
	for line := 1; ; line++ {
		b, err := readLine(br)
		if len(bytes.TrimSpace(b)) > 0 {
			op, derr := decodeOp(b, h)
			if derr != nil {
				return h, &DecodeError{Line: line, Err: derr}
			}
			h = append(h, op)
		}
		if errors.Is(err, io.EOF) {
			return h, nil
		}
		if err != nil {
			return h, &DecodeError{Line: line, Err: err}
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes: %w", MaxLineBytes, ErrMalformed)
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func decodeOp(b []byte, prev History) (Op, error) {
	var op Op
	if err := json.Unmarshal(b, &op); err != nil {
		return op, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := op.Check(); err != nil {
		return op, err
	}
	if want := int64(len(prev)); op.Index != want {
		return op, fmt.Errorf("index %d, want %d: %w", op.Index, want, ErrMalformed)
	}
	if n := len(prev); n > 0 && op.Time < prev[n-1].Time {
		return op, fmt.Errorf("time %d before previous op's %d: %w", op.Time, prev[n-1].Time, ErrMalformed)
	}
	return op, nil
}

// Check reports whether op is well formed on its own: known type and f, a
// payload that fits its f, and no negative times or offsets where an offset
// must be known.
func (op *Op) Check() error {
	if !op.Type.valid() {
		return fmt.Errorf("op %d: unknown type %q: %w", op.Index, op.Type, ErrMalformed)
	}
	if !op.F.valid() {
		return fmt.Errorf("op %d: unknown f %q: %w", op.Index, op.F, ErrMalformed)
	}
	if op.Time < 0 {
		return fmt.Errorf("op %d: negative time: %w", op.Index, ErrMalformed)
	}
	if op.F.nemesis() != (op.Process == NemesisProcess) {
		return fmt.Errorf("op %d: f %s on process %d: %w", op.Index, op.F, op.Process, ErrMalformed)
	}
	if op.Process < NemesisProcess {
		return fmt.Errorf("op %d: process %d: %w", op.Index, op.Process, ErrMalformed)
	}
	return op.checkPayload()
}

func (op *Op) checkPayload() error {
	switch op.F {
	case FSend:
		return op.checkSend()
	case FPoll, FFinalRead:
		return op.checkReads()
	case FTxn:
		return op.checkTxn()
	case FAssign:
		for _, s := range op.Seeks {
			if s.Offset < 0 {
				return fmt.Errorf("op %d: seek to %d: %w", op.Index, s.Offset, ErrMalformed)
			}
		}
	case FStart, FStop:
		if op.Nemesis == "" {
			return fmt.Errorf("op %d: %s without a nemesis name: %w", op.Index, op.F, ErrMalformed)
		}
	}
	return nil
}

func (op *Op) checkSend() error {
	if op.Send == nil {
		return fmt.Errorf("op %d: send without a value: %w", op.Index, ErrMalformed)
	}
	if op.Type == OK && op.Send.Offset < 0 {
		return fmt.Errorf("op %d: ok send without an offset: %w", op.Index, ErrMalformed)
	}
	if op.Send.Offset < NoOffset {
		return fmt.Errorf("op %d: send offset %d: %w", op.Index, op.Send.Offset, ErrMalformed)
	}
	return nil
}

// checkTxn checks a transaction: its value is present, an ok (committed)
// txn's sends all carry acknowledged offsets, no offset is below NoOffset,
// EndStart is not negative, and its reads are well formed.
func (op *Op) checkTxn() error {
	if op.Txn == nil {
		return fmt.Errorf("op %d: txn without a value: %w", op.Index, ErrMalformed)
	}
	if op.Txn.EndStart < 0 {
		return fmt.Errorf("op %d: txn end start %d: %w", op.Index, op.Txn.EndStart, ErrMalformed)
	}
	for i, s := range op.Txn.Sends {
		if op.Type == OK && s.Offset < 0 {
			return fmt.Errorf("op %d: committed txn's send %d without an offset: %w", op.Index, i, ErrMalformed)
		}
		if s.Offset < NoOffset {
			return fmt.Errorf("op %d: txn send %d offset %d: %w", op.Index, i, s.Offset, ErrMalformed)
		}
	}
	return op.checkReads()
}

func (op *Op) checkReads() error {
	if op.F == FFinalRead && len(op.Reads) != 1 {
		return fmt.Errorf("op %d: final read of %d partitions, want 1: %w", op.Index, len(op.Reads), ErrMalformed)
	}
	for _, r := range op.Reads {
		if r.HighWatermark < NoOffset {
			return fmt.Errorf("op %d: high watermark %d: %w", op.Index, r.HighWatermark, ErrMalformed)
		}
		for _, rec := range r.Records {
			if rec.Offset < 0 {
				return fmt.Errorf("op %d: record offset %d: %w", op.Index, rec.Offset, ErrMalformed)
			}
		}
	}
	return nil
}
