package jepsen

import (
	"fmt"
	"slices"
	"sort"
)

// interval is a range of offsets [lo, hi] a read covered.
type interval struct {
	lo, hi int64
	op     int64 // the read op that reached hi
	proc   int
}

// coverage holds, per partition, the covered intervals sorted by lo, with
// the running maximum of hi so that a point query is one binary search.
type coverage struct {
	ivs   map[TP][]interval
	reach map[TP][]int // index of the interval with the largest hi so far
}

func (a *analysis) coverage(streams []*stream) *coverage {
	c := &coverage{ivs: map[TP][]interval{}, reach: map[TP][]int{}}
	for _, s := range streams {
		if lo, hi, ok := s.covered(); ok {
			c.ivs[s.tp] = append(c.ivs[s.tp], interval{lo, hi, s.last.Index, s.proc})
		}
	}
	for tp, ivs := range c.ivs {
		slices.SortStableFunc(ivs, func(x, y interval) int { return cmpInt64(x.lo, y.lo) })
		reach := make([]int, len(ivs))
		for i := range ivs {
			reach[i] = i
			if i > 0 && ivs[reach[i-1]].hi >= ivs[i].hi {
				reach[i] = reach[i-1]
			}
		}
		c.reach[tp] = reach
	}
	return c
}

// find returns a read interval of tp that contains offset o.
func (c *coverage) find(tp TP, o int64) (interval, bool) {
	ivs := c.ivs[tp]
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].lo > o }) - 1
	if i < 0 {
		return interval{}, false
	}
	best := ivs[c.reach[tp][i]]
	return best, best.hi >= o
}

func cmpInt64(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// checkLostWrite flags ok sends that no read returned although some read
// covered their acknowledged offset.
func checkLostWrite(a *analysis, cov *coverage, limit int) CheckerResult {
	f := newFinding(CheckLostWrite, limit)
	for _, s := range a.sends {
		if s.typ() != OK || a.observed(s.v.Value) {
			continue
		}
		iv, ok := cov.find(s.v.TP(), s.offset)
		if !ok {
			continue
		}
		f.flag(s.v.TP().String(), Anomaly{
			Topic: s.v.Topic, Partition: s.v.Partition, Offset: s.offset, Value: s.v.Value,
			Process: s.inv.Process, Ops: []int64{s.comp.Index, iv.op},
			Detail: fmt.Sprintf("send of %q acknowledged at offset %d; process %d read offsets %d..%d of %s and no read returned it",
				s.v.Value, s.offset, iv.proc, iv.lo, iv.hi, s.v.TP()),
		})
	}
	return f.result()
}

// checkUnseen flags ok sends that no read returned at all, where a
// complete final read of their partition should have; without one they are
// undecided. It also returns the number of acknowledged but not yet seen
// sends over time.
func checkUnseen(a *analysis, limit int) (CheckerResult, []UnseenPoint) {
	f := newFinding(CheckUnseen, limit)
	for _, s := range a.sends {
		if s.typ() != OK || a.observed(s.v.Value) {
			continue
		}
		tp := s.v.TP()
		fin, ok := a.finals[tp]
		if !ok || fin.inv.Time < s.comp.Time {
			f.undecided(tp.String() + " no-final-read")
			continue
		}
		f.flag(tp.String(), Anomaly{
			Topic: s.v.Topic, Partition: s.v.Partition, Offset: s.offset, Value: s.v.Value,
			Process: s.inv.Process, Ops: []int64{s.comp.Index, fin.comp.Index},
			Detail: fmt.Sprintf("send of %q acknowledged at offset %d of %s; no read returned it, and the final read reached high watermark %d",
				s.v.Value, s.offset, tp, fin.r.HighWatermark),
		})
	}
	if f.res.Verdict == VerdictUnknown {
		f.res.Note = "acknowledged sends unseen on partitions whose final read did not complete"
	}
	return f.result(), unseenSeries(a, defaultUnseenMaxPoints)
}

// unseenSeries counts, after each acknowledgement or first sighting, the
// ok sends acknowledged but not yet returned by any completed read.
func unseenSeries(a *analysis, maxPoints int) []UnseenPoint {
	type event struct {
		t     int64
		delta int
	}
	var evs []event
	for _, s := range a.sends {
		if s.typ() != OK {
			continue
		}
		seen, ok := a.firstSeen[s.v.Value]
		if ok && seen <= s.comp.Time {
			continue
		}
		evs = append(evs, event{s.comp.Time, 1})
		if ok {
			evs = append(evs, event{seen, -1})
		}
	}
	slices.SortStableFunc(evs, func(x, y event) int { return cmpInt64(x.t, y.t) })
	var pts []UnseenPoint
	n := 0
	for i, e := range evs {
		n += e.delta
		if i+1 < len(evs) && evs[i+1].t == e.t {
			continue
		}
		pts = append(pts, UnseenPoint{e.t, n})
	}
	return downsample(pts, maxPoints)
}

// downsample keeps at most n points: the largest of each bucket, so peaks
// survive, and always the last point.
func downsample(pts []UnseenPoint, n int) []UnseenPoint {
	if len(pts) <= n || n < 2 {
		return pts
	}
	size := (len(pts) + n - 2) / (n - 1)
	var out []UnseenPoint
	for i := 0; i < len(pts)-1; i += size {
		best := pts[i]
		for _, p := range pts[i:min(i+size, len(pts)-1)] {
			if p.Unseen > best.Unseen {
				best = p
			}
		}
		out = append(out, best)
	}
	return append(out, pts[len(pts)-1])
}
