//go:build long

package main

import (
	"testing"
	"time"
)

// TestE2E_LeaderKillRepeated is the long form of TestE2E_LeaderKill: a
// bigger load, and the leader of each partition in turn killed and
// restarted six times while it runs (go test -tags long).
func TestE2E_LeaderKillRepeated(t *testing.T) {
	load := failoverLoad{parts: 3, beforeKill: 3000, afterKill: 3000, maxRecords: 400000, loadTimeout: 2 * time.Minute}
	t.Run("log-catch-up", func(t *testing.T) { runLeaderKill(t, load, 6) })
	t.Run("snapshot-catch-up", func(t *testing.T) { runLeaderKill(t, load, 6, "--snapshot-entries", "16") })
}

// TestE2E_LeaderKillRepeatedISR is its ISR form: min.insync.replicas=2,
// with no flush and with flush.messages=1.
func TestE2E_LeaderKillRepeatedISR(t *testing.T) {
	load := failoverLoad{parts: 3, beforeKill: 3000, afterKill: 3000, maxRecords: 400000, loadTimeout: 2 * time.Minute}
	t.Run("no-flush", func(t *testing.T) { runLeaderKillWith(t, load, 6, isrTopic) })
	t.Run("flush-messages-1", func(t *testing.T) { runLeaderKillWith(t, load, 6, isrTopic.plus("flush.messages", "1")) })
}
