package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ServerArgs returns the argument template for `raftq server` nodes:
//
//	server --node-id N --cluster-id ID --data-dir DIR
//	  --kafka-addr H:P --peer-addr H:P --admin-addr H:P
//	  --initial-cluster 1=H:PEER,2=H:PEER,... --fsync POLICY [extra...]
//
// Every address is the node's own 127.0.0.<N+1>. The broker must dial its
// peers from its peer address's IP (bind the local address), or the
// partitions, which match source and destination, would not cut it.
func ServerArgs(clusterID, fsync string, extra ...string) ArgsFunc {
	return func(n Node, all []Node) []string {
		peers := make([]string, len(all))
		for i, m := range all {
			peers[i] = fmt.Sprintf("%d=%s", m.ID, m.PeerAddr())
		}
		args := []string{
			"server",
			"--node-id", fmt.Sprint(n.ID),
			"--cluster-id", clusterID,
			"--data-dir", n.DataDir,
			"--kafka-addr", n.KafkaAddr(),
			"--peer-addr", n.PeerAddr(),
			"--admin-addr", n.AdminAddr(),
			"--initial-cluster", strings.Join(peers, ","),
			"--fsync", fsync,
		}
		return append(args, extra...)
	}
}

// HTTPReady is a ReadyFunc that wants HTTP 200 from path on the node's
// admin address (raftq: "/v1/status").
func HTTPReady(path string) ReadyFunc {
	return func(ctx context.Context, c *Cluster, n Node) error {
		url := c.AdminURL(n, path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("chaos: GET %s: %s", url, resp.Status)
		}
		return nil
	}
}
