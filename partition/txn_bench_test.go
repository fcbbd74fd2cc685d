package partition

import (
	"testing"

	"github.com/raftq/raftq/internal/vfs"
)

// BenchmarkAppendTxnMem measures what the transaction bookkeeping adds to
// the apply path without the disk (vfs.Mem): plain batches, against
// transactional ones from 8 producers, each transaction 10 batches and a
// marker (every other one an abort), then SetHighWatermark as apply does.
func BenchmarkAppendTxnMem(b *testing.B) {
	for _, txn := range []bool{false, true} {
		name := "plain"
		if txn {
			name = "transactional"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.FS = vfs.NewMem()
			l, err := Open("/p", cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			data := idemBatch(b, 1, 0, 0, "0123456789abcdef0123456789abcdef")
			if txn {
				data = txnBatch(b, 1, 0, 0, "0123456789abcdef0123456789abcdef")
			}
			markers := [2][]byte{commitMarker(1, 0), abortMarker(1, 0)}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				batch := data
				if txn && i%11 == 10 {
					batch = markers[i/11%2]
				}
				_, last, err := l.AppendValidated(batch, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.SetHighWatermark(last + 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
