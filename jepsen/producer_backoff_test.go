package jepsen

import (
	"testing"
	"time"
)

// Producers back off as the Java client does by default: 100 ms doubling
// to at most 1 s.
func TestRetryBackoff_JavaDefaults(t *testing.T) {
	want := []time.Duration{100, 100, 200, 400, 800, 1000, 1000}
	for tries, w := range want {
		if got := retryBackoff(tries); got != w*time.Millisecond {
			t.Errorf("try %d: %v, want %v", tries, got, w*time.Millisecond)
		}
	}
}
