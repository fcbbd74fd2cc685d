package isr

import (
	"slices"

	"github.com/raftq/raftq/coordinator"
)

// A replica whose log lost records known durable at recovery
// (partition.ISRLog.LostData: bit rot, a cut sealed segment, a disk that
// lost synced bytes) may lack records it acknowledged. Elected leader, as
// group 0 does for the last ISR member (or KIP-966's last known leader),
// its followers would truncate to its shorter log and the last copies of
// those records would go. So it never leads: told to, it stays without a
// role, serving neither produce nor fetch, and proposes an AlterPartition
// with LostData, which takes it out of the ISR, the ELR and the last
// known leader and elects another replica, or none. Once group 0 has
// taken it, the flag is gone: group 0 elects this replica again only
// uncleanly (the topic's unclean.leader.election.enable, or ElectLeaders),
// which is the operator's choice to lose data. Catching up ends it too:
// a leader let the replica into its ISR.

// checkLostData updates the flag for s, the state just taken: epochs in
// the log newer than s's leader epoch are damage and are cut
// (ISRLog.TruncateAboveEpoch), which raises it; group 0's answer to a
// resignation, and s showing it applied, clear it.
func (p *Partition) checkLostData(s State) {
	if cut, err := p.log.TruncateAboveEpoch(s.LeaderEpoch); err != nil {
		p.logger.Error("isr: cannot cut epochs newer than the leader's", "group", p.cfg.Group, "epoch", s.LeaderEpoch, "err", err)
	} else if cut {
		p.lostData, p.resigned = true, -1
	}
	p.takeResignAnswer()
	switch {
	case !p.lostData:
	case p.resigned >= 0 && s.PartitionEpoch >= p.resigned:
		p.lostData = false
		p.logger.Info("isr: group 0 took the resignation", "group", p.cfg.Group, "partition_epoch", s.PartitionEpoch)
	case s.Leader != p.m.cfg.Self && slices.Contains(s.ISR, p.m.cfg.Self):
		p.lostData = false // caught up: its leader let it into the ISR
	}
}

// takeResignAnswer takes group 0's answer to the resignation in flight,
// if it has come.
func (p *Partition) takeResignAnswer() {
	if p.resigning == nil {
		return
	}
	select {
	case res, ok := <-p.resigning:
		p.resigning = nil
		if ok && res.Err == nil {
			p.resigned = res.Partition.PartitionEpoch
		}
	default:
	}
}

// resign stops any role and proposes the resignation for the epochs of
// the state just taken, unless one is in flight. The owner holds mu.
func (p *Partition) resign() {
	p.stopLeading()
	p.m.unfollow(p)
	p.setRole(RoleNone, p.st.LeaderEpoch, 0)
	if p.resigning != nil {
		return
	}
	p.logger.Warn("isr: recovery lost durable records; resigning leadership", "group", p.cfg.Group, "epoch", p.st.LeaderEpoch)
	p.resigning = p.m.cfg.Propose(coordinator.AlterPartitionItem{
		Group:          p.cfg.Group,
		Leader:         p.m.cfg.Self,
		LeaderEpoch:    p.st.LeaderEpoch,
		PartitionEpoch: p.st.PartitionEpoch,
		LostData:       true,
	})
}

// retryResign runs on the ISR expiration tick: a resignation answered
// is taken, and one refused (or lost) is proposed again while group 0
// still names this replica leader.
func (p *Partition) retryResign() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.lostData {
		return
	}
	p.takeResignAnswer()
	if p.resigning == nil && p.resigned < 0 && p.st.Leader == p.m.cfg.Self {
		p.resign()
	}
}
