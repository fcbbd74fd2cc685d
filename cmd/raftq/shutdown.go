package main

import (
	"context"
	"time"

	"github.com/raftq/raftq/broker"
)

const shutdownTimeoutUsage = "on SIGTERM or Ctrl-C, how long the node may take to hand the leadership of its partitions and of the metadata group to other replicas before it stops (0: stop at once)"

// drainNode runs the node's leadership drain (broker.Node.Drain), bounded
// by timeout; 0 skips it. A second Ctrl-C still quits at once (main.go);
// a repeated SIGTERM does not cut it short.
func drainNode(n *broker.Node, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	n.Drain(ctx)
}
