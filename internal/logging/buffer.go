package logging

import (
	"bytes"
	"sync"
)

// Buffer is a log sink that several goroutines may write while another
// reads it: tests hand it to a logger, or a child process's stderr, and
// search what arrived.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
