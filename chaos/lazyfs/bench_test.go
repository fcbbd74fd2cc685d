package lazyfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raftq/raftq/chaos/internal/testenv"
)

// BenchmarkAppendFsync appends 4 KiB and fsyncs, as a WAL does, on the
// backing filesystem directly (the baseline) and through lazyfs with and
// without SyncBacking.
func BenchmarkAppendFsync(b *testing.B) {
	testenv.Require(b, Available())
	run := func(b *testing.B, dir string) {
		f, err := os.Create(filepath.Join(dir, "wal"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		b.SetBytes(int64(len(buf)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, b.TempDir()) })
	for _, sync := range []bool{false, true} {
		name := "lazyfs"
		if sync {
			name = "lazyfs-syncbacking"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			fsys, err := Mount(Config{Backing: filepath.Join(dir, "b"), Mountpoint: filepath.Join(dir, "m"), SyncBacking: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer fsys.Unmount()
			run(b, fsys.Mountpoint())
		})
	}
}
