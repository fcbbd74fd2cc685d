package groups

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// lockSession returns the group's session locked, creating it if need
// be. A session retired by the tick (dead while the coordinator is still
// active) is replaced by a fresh one.
func (c *Coordinator) lockSession(name string) (*session, int16) {
	for {
		s, code := c.session(name, true)
		if code != 0 {
			return nil, code
		}
		s.mu.Lock()
		if !s.dead {
			return s, 0
		}
		s.mu.Unlock()
		c.forget(name, s)
		if c.Check() != 0 {
			return nil, kerr.NotCoordinator.Code
		}
	}
}

// Tick runs the coordinator's clocks: join and sync deadlines, session
// expiry, handed-out member ids, and offset expiry. The owner calls it
// periodically (the broker every 100ms); it returns when every group's
// work is done, and groups work in parallel.
func (c *Coordinator) Tick() {
	if c.Check() != 0 {
		return
	}
	now := c.cfg.Now()
	var wg sync.WaitGroup
	for _, s := range c.sessionList() {
		if !s.ticking.CompareAndSwap(false, true) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.ticking.Store(false)
			c.tickSession(s, now)
		}()
	}
	wg.Wait()
	c.maybeExpire(now)
}

func (c *Coordinator) tickSession(s *session, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	for id, d := range s.pending {
		if now.After(d) {
			delete(s.pending, id)
		}
	}
	g := c.cfg.Machine.Group(s.name)
	if gone := c.expireMembers(s, g, now); gone {
		return
	}
	switch {
	case s.preparing && !now.Before(s.prepDeadline):
		c.completeRebalance(s, g, now)
	case !s.preparing && g != nil && g.Phase == PhaseCompleting && !s.syncDeadline.IsZero() && !now.Before(s.syncDeadline):
		c.removeUnsynced(s, g, now)
	case !s.preparing && len(s.joins) == 0 && len(s.pending) == 0 && len(s.syncs) == 0 && (g == nil || len(g.Members) == 0):
		s.dead = true // idle: retire the soft state
		c.forget(s.name, s)
	}
}

// expireMembers removes members whose session ran out (those waiting in
// JoinGroup or SyncGroup are kept alive, as Kafka does), reporting
// whether it did.
func (c *Coordinator) expireMembers(s *session, g *Group, now time.Time) bool {
	if g == nil {
		return false
	}
	var ids []string
	for _, id := range g.MemberIDs() {
		d, ok := s.deadlines[id]
		if !ok {
			s.deadlines[id] = now.Add(ms(g.Members[id].SessionTimeoutMs))
			continue
		}
		if now.After(d) && s.joins[id] == nil && s.syncs[id] == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return false
	}
	c.log.Info("group members' sessions expired", "group", s.name, "members", ids)
	c.removeMembers(s, ids, now)
	return true
}

// removeUnsynced removes the members that did not send SyncGroup before
// the sync deadline (the leader among them, if it never assigned).
func (c *Coordinator) removeUnsynced(s *session, g *Group, now time.Time) {
	var ids []string
	for _, id := range g.MemberIDs() {
		if s.syncs[id] == nil {
			ids = append(ids, id)
		}
	}
	s.syncDeadline = time.Time{}
	if len(ids) > 0 {
		c.removeMembers(s, ids, now)
	}
}

func (c *Coordinator) removeMembers(s *session, ids []string, now time.Time) {
	if _, code := c.proposeCode(&Command{Remove: &Remove{Group: s.name, Members: ids, NowMs: now.UnixMilli()}}); code != 0 {
		return // retried next tick
	}
	for _, id := range ids {
		delete(s.deadlines, id)
	}
	c.afterDeparture(s)
}

// maybeExpire proposes an Expire once per ExpireInterval when some empty
// group's offsets have outlived the retention.
func (c *Coordinator) maybeExpire(now time.Time) {
	c.mu.Lock()
	due := c.active && now.Sub(c.lastExpire) >= c.cfg.ExpireInterval
	if due {
		c.lastExpire = now
	}
	c.mu.Unlock()
	ret := c.cfg.OffsetsRetention.Milliseconds()
	if !due || !c.cfg.Machine.wouldExpire(now.UnixMilli(), ret) {
		return
	}
	if _, code := c.proposeCode(&Command{Expire: &Expire{NowMs: now.UnixMilli(), RetentionMs: ret}}); code == 0 {
		c.log.Info("expired offsets of empty groups")
	}
}
