package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Limits are the settings a topic's configs give its log (Kafka's
// segment.bytes, segment.ms, index.interval.bytes, max.message.bytes,
// retention.bytes and retention.ms). Log.SetLimits changes them while the
// log is open, as an altered topic config takes effect in Kafka.
type Limits struct {
	// SegmentBytes is the size at which the active segment is rolled: an
	// append that would take a non-empty segment past it goes to a new one.
	// At most math.MaxInt32, because index positions are 32-bit (as in Kafka).
	SegmentBytes int64

	// SegmentAge rolls the active segment once its first batch is this old
	// by Clock (Kafka's segment.ms). Zero disables rolling by age.
	SegmentAge time.Duration

	// IndexIntervalBytes is how many log bytes lie between two entries of the
	// sparse offset index (Kafka's index.interval.bytes).
	IndexIntervalBytes int

	// MaxBatchBytes is the largest batch Append accepts, header included
	// (Kafka's message.max.bytes). At most SegmentBytes.
	MaxBatchBytes int

	// RetentionBytes is the size the log may keep before Retention offers
	// whole segments for deletion. Negative keeps everything.
	RetentionBytes int64

	// RetentionAge lets Retention delete a segment once its newest record
	// timestamp is older than this by Clock (Kafka's retention.ms).
	// Zero or negative keeps everything.
	RetentionAge time.Duration
}

// Config sets the shape of a Log. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	Limits

	// WritebackBytes starts the kernel writing a segment's bytes to disk
	// (without waiting) each time this many have been appended since the
	// last start, as RocksDB's bytes_per_sync does. The page cache then
	// never holds much unwritten log, so the fsync of a snapshot is short
	// and does not stall the raft WAL's fsyncs on the same disk behind a
	// large journal commit. Zero leaves writeback to the kernel.
	WritebackBytes int64

	// Clock is the time source for rolling and retention by age; nil means
	// time.Now. Tests pass a fake.
	Clock func() time.Time

	// FS is the file system the log lives on; nil means the operating
	// system's. Tests inject write and sync faults through it.
	FS FS

	// Logger receives recovery and failure reports; nil discards them.
	Logger *slog.Logger

	// UnsafeSkipCRCChecks makes recovery trust the segments below the
	// checkpoint's recovery point after a look at their index and tail,
	// as it did before bit rot was a fault, instead of checking every
	// batch's CRC at open. Only for showing what the check catches.
	UnsafeSkipCRCChecks bool

	// crashPoint, set only by this package's tests, is called at named
	// points inside multi-step operations so a crash test can kill the
	// process exactly there.
	crashPoint func(name string)
}

// DefaultConfig returns Kafka's defaults: 1 GiB segments rolled after seven
// days, an index entry every 4 KiB, batches up to 1 MiB plus header room,
// unlimited retention by size and seven days by time.
func DefaultConfig() Config {
	return Config{
		Limits: Limits{
			SegmentBytes:       1 << 30,
			SegmentAge:         7 * 24 * time.Hour,
			IndexIntervalBytes: 4096,
			MaxBatchBytes:      1048588,
			RetentionBytes:     -1,
			RetentionAge:       7 * 24 * time.Hour,
		},
		WritebackBytes: 1 << 20,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if c.WritebackBytes < 0 {
		return errors.New("partition: negative writeback bytes")
	}
	return c.Limits.Validate()
}

// Validate reports the first limit that cannot work.
func (c Limits) Validate() error {
	switch {
	case c.SegmentBytes < batchHeaderSize || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("partition: segment bytes %d outside [%d, %d]", c.SegmentBytes, batchHeaderSize, math.MaxInt32)
	case c.SegmentAge < 0:
		return errors.New("partition: negative segment age")
	case c.IndexIntervalBytes <= 0:
		return fmt.Errorf("partition: index interval bytes %d must be positive", c.IndexIntervalBytes)
	case c.MaxBatchBytes < batchHeaderSize:
		return fmt.Errorf("partition: max batch bytes %d below the %d-byte batch header", c.MaxBatchBytes, batchHeaderSize)
	case int64(c.MaxBatchBytes) > c.SegmentBytes:
		return fmt.Errorf("partition: max batch bytes %d above segment bytes %d", c.MaxBatchBytes, c.SegmentBytes)
	}
	return nil
}

func (c Config) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock()
}
