package partition

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Batch rejections. A *BatchError wraps exactly one of them; ErrorCode maps
// them to the Kafka codes a produce response carries.
var (
	// ErrCorruptBatch: the bytes are not a well-formed batch (frame length,
	// CRC-32C, record framing). Kafka: CORRUPT_MESSAGE.
	ErrCorruptBatch = errors.New("partition: corrupt record batch")
	// ErrInvalidRecord: a well-formed batch that breaks a rule (magic other
	// than 2, record count against lastOffsetDelta, more than one batch).
	// Kafka: INVALID_RECORD.
	ErrInvalidRecord = errors.New("partition: invalid record batch")
	// ErrBatchTooLarge: the batch exceeds Config.MaxBatchBytes. Kafka:
	// MESSAGE_TOO_LARGE.
	ErrBatchTooLarge = errors.New("partition: record batch too large")
)

// Log state errors.
var (
	// ErrOffsetOutOfRange is wrapped by *OffsetOutOfRangeError.
	ErrOffsetOutOfRange = errors.New("partition: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("partition: log closed")
	// ErrFailed: an earlier write or sync failed, so the log refuses every
	// change until it is reopened (and recovered). Reads keep working. The
	// error returned wraps both ErrFailed and the original cause (for
	// example syscall.ENOSPC).
	ErrFailed = errors.New("partition: log failed after a write or sync error; reopen to recover")
	// ErrCorruptLog: bytes already in a segment do not parse (disk damage or
	// a concurrent Truncate under a reader).
	ErrCorruptLog = errors.New("partition: corrupt segment data")
	// ErrOffsetMismatch: a replicated batch does not start at the log end
	// (Kafka's follower check; the follower must truncate or refetch).
	ErrOffsetMismatch = errors.New("partition: replicated batch does not start at the log end")
)

// BatchError says why a batch was rejected. It unwraps to ErrCorruptBatch,
// ErrInvalidRecord or ErrBatchTooLarge.
type BatchError struct {
	Kind   error
	Reason string
}

func (e *BatchError) Error() string { return e.Kind.Error() + ": " + e.Reason }
func (e *BatchError) Unwrap() error { return e.Kind }

func corrupt(format string, args ...any) error {
	return &BatchError{Kind: ErrCorruptBatch, Reason: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return &BatchError{Kind: ErrInvalidRecord, Reason: fmt.Sprintf(format, args...)}
}

// OffsetOutOfRangeError reports an offset outside [Start, End].
type OffsetOutOfRangeError struct {
	Offset, Start, End int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("partition: offset %d out of range [%d, %d]", e.Offset, e.Start, e.End)
}

func (e *OffsetOutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// ErrorCode maps an error from this package to the Kafka error code a
// response should carry: 0 for nil, a *kerr.Error's own code (producer
// refusals such as INVALID_PRODUCER_EPOCH for a fenced transactional batch
// or marker), CORRUPT_MESSAGE, INVALID_RECORD,
// MESSAGE_TOO_LARGE, OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR for failed,
// closed or damaged logs, and UNKNOWN_SERVER_ERROR for anything else.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code // ProduceResult.Err: INVALID_PRODUCER_EPOCH and the sequence errors
	}
	for _, m := range codeMap {
		if errors.Is(err, m.err) {
			return m.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

var codeMap = []struct {
	err  error
	code *kerr.Error
}{
	{ErrBatchTooLarge, kerr.MessageTooLarge},
	{ErrCorruptBatch, kerr.CorruptMessage},
	{ErrInvalidRecord, kerr.InvalidRecord},
	{ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{ErrFailed, kerr.KafkaStorageError},
	{ErrClosed, kerr.KafkaStorageError},
	{ErrCorruptLog, kerr.KafkaStorageError},
}
