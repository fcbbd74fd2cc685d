package isr

import "github.com/raftq/raftq/coordinator"

// An offline partition (State.offline: no leader, and nobody group 0
// could elect cleanly) recovers once every replica has told group 0
// where its log ends: group 0 then elects the one ending at the newest
// epoch, furthest (coordinator/isr_recover.go, after KIP-966's unclean
// recovery). A replica reports when group 0 holds no report of its
// (State.Reported), unless it has reported and no newer state came
// since, and again on the expiration tick while group 0 has not taken
// its report. Group 0 drops the report of a broker it fences without a
// new partition epoch, so the state, not the epoch, says when to report
// again.

// maybeReportLogEnd proposes this replica's log end for the offline
// partition of the state just taken. The owner holds mu.
func (p *Partition) maybeReportLogEnd() {
	if !p.st.offline() || p.reporting != nil || p.st.Reported || p.reportedUpd == p.updates {
		return
	}
	end, epoch := p.log.EndOffset(), p.log.LatestEpoch()
	p.logger.Warn("isr: partition offline; reporting the log end for unclean recovery", "group", p.cfg.Group, "end", end, "last_epoch", epoch)
	p.reporting = p.m.cfg.Propose(coordinator.AlterPartitionItem{
		Group:          p.cfg.Group,
		Leader:         p.m.cfg.Self,
		LeaderEpoch:    p.st.LeaderEpoch,
		PartitionEpoch: p.st.PartitionEpoch,
		ISR:            []coordinator.ISRMember{{ID: p.m.cfg.Self, BrokerEpoch: p.st.BrokerEpoch}},
		LogEnd:         &coordinator.ReplicaLogEnd{Broker: p.m.cfg.Self, LastEpoch: epoch, End: end, LostData: p.lostData},
	})
	p.reportUpd = p.updates
}

// retryReportLogEnd takes the answer to the report in flight and reports
// again if group 0 did not take it and the partition is still offline.
func (p *Partition) retryReportLogEnd() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.reporting == nil {
		return
	}
	select {
	case res, ok := <-p.reporting:
		p.reporting = nil
		if ok && res.Err == nil {
			p.reportedUpd = p.reportUpd
		}
	default:
		return
	}
	p.maybeReportLogEnd()
}
