package isr

import "sync"

// notifier wakes every goroutine waiting for "something changed": the
// leader's fetch long-polls wait on it for an append or an HW change on
// any partition this node leads. A change costs a lock, and a channel
// close only when someone waits.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
