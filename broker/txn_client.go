package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerClients are this node's Kafka clients of other brokers'
// inter-broker listeners (Config.InterBrokerListener), one per address, for the broker-to-broker requests of
// transactions: WriteTxnMarkers from a transaction coordinator to
// partition leaders, and AddPartitionsToTxn v4+ (verify-only) from a
// partition leader to a transaction coordinator, as Kafka sends them.
// Each client negotiates versions with its broker (ApiVersions), so a
// request goes at the highest version both know.
type brokerClients struct {
	mu      sync.Mutex // guards clients and closed; a leaf
	clients map[string]*kgo.Client
	closed  bool
}

// errClientsClosed is a request after the node began to close.
var errClientsClosed = errors.New("broker: broker clients closed")

// brokerRequest sends req to the Kafka listener at addr and returns its
// response.
func (n *Node) brokerRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := n.brokerClient(addr)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("broker client of %s has no broker", addr)
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	return resp, nil
}

func (n *Node) brokerClient(addr string) (*kgo.Client, error) {
	bc := &n.brokerCl
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.closed {
		return nil, errClientsClosed
	}
	if cl := bc.clients[addr]; cl != nil {
		return cl, nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("raftq-broker-%d", n.cfg.NodeID)),
		kgo.DialTimeout(3 * time.Second), kgo.RequestRetries(0)}, n.interBrokerOpts()...) // interbroker.go
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("broker client of %s: %w", addr, err)
	}
	if bc.clients == nil {
		bc.clients = map[string]*kgo.Client{}
	}
	bc.clients[addr] = cl
	return cl, nil
}

// closeBrokerClients closes every broker client; the groups loop calls it
// as it stops, after the coordinators' marker writers are done.
func (n *Node) closeBrokerClients() {
	bc := &n.brokerCl
	bc.mu.Lock()
	cls := bc.clients
	bc.clients, bc.closed = nil, true
	bc.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
}
