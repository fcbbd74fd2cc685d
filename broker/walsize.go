package broker

import (
	"log/slog"
	"sync"

	"github.com/raftq/raftq/raftgroup"
)

// processWAL is the process-wide etcd WAL segment size. etcd keeps it in a
// package variable that every open WAL reads on each save, so setting it
// while another node of this process (raftq dev, in-process tests) has
// WALs open is a data race. The first node started sets it; later nodes
// keep it.
var processWAL struct {
	once  sync.Once
	bytes int64
}

// setWALSegmentSize applies a node's WALSegmentBytes once per process and
// warns when a later node asks for another size.
func setWALSegmentSize(bytes int64, log *slog.Logger) {
	processWAL.once.Do(func() {
		raftgroup.SetWALSegmentSize(bytes)
		processWAL.bytes = bytes
	})
	if bytes != processWAL.bytes {
		log.Warn("WAL segment size is set once per process; keeping the first node's",
			"wanted", bytes, "using", processWAL.bytes)
	}
}
