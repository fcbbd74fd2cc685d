package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// setMaintenanceHTTP asks node via's admin API to turn broker id's
// maintenance on or off, and returns the HTTP status and the answer.
func (c *testCluster) setMaintenanceHTTP(t *testing.T, via, id uint64, on bool) (int, MaintenanceResult) {
	t.Helper()
	method := http.MethodDelete
	if on {
		method = http.MethodPut
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/v1/brokers/%d/maintenance", c.cfgs[via].AdminAddr, id)
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res MaintenanceResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, res
}

// maintained reports whether node id leads nothing (no partition, not
// group 0) while it is in maintenance and in every ISR of topic i, as
// node from sees the metadata; why says what is missing.
func (c *testCluster) maintained(id, from uint64) (ok bool, why string) {
	if led := c.nodes[id].ledGroups(); len(led) > 0 {
		return false, fmt.Sprintf("node %d leads groups %v", id, led)
	}
	if c.nodes[id].ctl.Status().IsLeader() {
		return false, fmt.Sprintf("node %d leads group 0", id)
	}
	st := c.nodes[from].Metadata()
	if b := st.Brokers[id]; b == nil || !b.InMaintenance || !b.Alive {
		return false, fmt.Sprintf("node %d's registration %+v, want alive and in maintenance", id, b)
	}
	for _, p := range st.Topics["i"].Partitions {
		if p.Leader == id || !slices.Contains(p.ISR, id) {
			return false, fmt.Sprintf("ISR partition %d: leader %d, ISR %v; want node %d in the ISR, not leading", p.Index, p.Leader, p.ISR, id)
		}
	}
	return true, ""
}

// Maintenance on moves every leadership off the metadata leader's node
// (its raft partitions, its ISR ones, group 0) while it stays in every
// ISR and acks=all writes go on; leader balance, every 100 ms, hands it
// nothing back, and a leadership raft gives it anyway it hands over
// again. Only one node may be in maintenance, and only a known one. Off,
// leader balance hands its preferred partitions back.
func TestNode_MaintenanceMovesEveryLeadershipAndKeepsItAway(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 100 * time.Millisecond })
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(t, cl, "r", 3, 3)
	createISRTopic(t, cl, "i", 3, 3, 2)
	produceEvery(t, cl, "before")
	m := c.metadataLeader(t)
	other := m%3 + 1
	eventually(t, fmt.Sprintf("node %d to lead a raft and an ISR partition", m), func() bool {
		return c.leadsOf(m, "r") > 0 && c.leadsOf(m, "i") > 0
	})
	if status, res := c.setMaintenanceHTTP(t, other, m, true); status != http.StatusOK || !res.Maintenance {
		t.Fatalf("maintenance on: %d %+v", status, res)
	}
	if status, res := c.setMaintenanceHTTP(t, m, other, true); status != http.StatusConflict || res.Error == "" {
		t.Errorf("a second node into maintenance: %d %+v, want 409 with the reason", status, res)
	}
	if status, _ := c.setMaintenanceHTTP(t, m, 9, true); status != http.StatusNotFound {
		t.Errorf("an unknown node into maintenance: %d, want 404", status)
	}
	eventually(t, fmt.Sprintf("node %d to hand over every leadership", m), func() bool {
		ok, _ := c.maintained(m, other)
		return ok
	})
	produceEvery(t, cl, "maintained")
	time.Sleep(500 * time.Millisecond) // five leader-balance rounds
	if ok, why := c.maintained(m, other); !ok {
		t.Errorf("after five leader-balance rounds: %s", why)
	}

	// raft cannot refuse a node its vote: given a leadership, the node in
	// maintenance hands it over again.
	for p := range int32(3) {
		if c.nodes[m].replicaFor("r", p) == nil {
			continue
		}
		leader := c.nodes[other].Metadata().Topics["r"].Partitions[p].Leader
		if leader == 0 || leader == m || c.nodes[leader] == nil {
			continue
		}
		if err := c.nodes[leader].replicaFor("r", p).lead.TransferLeadership(testCtx(t), m); err != nil {
			t.Fatalf("hand r-%d to node %d: %v", p, m, err)
		}
		eventually(t, fmt.Sprintf("node %d to hand r-%d over again", m, p), func() bool { return !c.raftLeads(m, "r", p) })
		break
	}

	if status, res := c.setMaintenanceHTTP(t, other, m, false); status != http.StatusOK || res.Maintenance {
		t.Fatalf("maintenance off: %d %+v", status, res)
	}
	eventually(t, fmt.Sprintf("leader balance to hand node %d its preferred partitions back", m), func() bool {
		st := c.nodes[m].Metadata()
		want := 0
		for _, topic := range []string{"r", "i"} {
			for _, p := range st.Topics[topic].Partitions {
				if p.Replicas[0] == m {
					want++
				}
			}
		}
		return c.leadsOf(m, "r")+c.leadsOf(m, "i") == want && want >= 2
	})
	produceEvery(t, cl, "after")
}
