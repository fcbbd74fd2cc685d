package jepsen

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/raftq/raftq/chaos"
)

// Measures are the figures of a run that the replication-mode matrix
// compares, all computed from the history and the checkers' counts:
//
//   - Acknowledged: ok sends. Attempted: sends invoked.
//   - Lost, Unseen, Duplicated, Reordered and Inconsistent are the
//     lost-write, unseen, duplicate, nonmonotonic-send plus
//     nonmonotonic-poll, and inconsistent-offsets anomaly counts; each
//     *PerMillion is that count per million acknowledged sends. Loss is
//     unseen plus inconsistent-offsets: acknowledged values missing from
//     every read (lost-write is a subset of unseen) and offsets whose
//     acknowledged value was replaced.
//   - A fault window runs from the invocation of a fault's start to the
//     completion of its stop (or the end of the history). A send is in a
//     window when it was invoked in it. Availability is ok sends over
//     sends attempted, overall, in any window, outside every window, and
//     per window; and in any window per partition, of which the worst
//     (among partitions with at least minPartitionSends there) is kept:
//     a fault that stops one partition of four hides in the total.
//   - Failover of a fault, per partition: from the window's start to the
//     completion of the first ok send to that partition invoked once the
//     fault had taken effect (its start completed: a partition's rules
//     are in, a killed node is reaped), so that a send answered before
//     the fault bit does not count; -1 when sends were invoked then and none was
//     ok (a fault that lasts to the end of the workload); a partition
//     nothing was sent to after it is left out. The fault's failover is
//     the largest over those partitions (the time until every partition
//     took writes again; the partition a leader fault hit is the slow
//     one), -1 if any never recovered, 0 with none. A fault is
//     overlapped when another began before its failover was over; the
//     summaries (p50, p99, max) are over the faults that recovered and
//     were not overlapped. A membership fault measures no failover (it
//     moves replicas, which clients should not notice) unless its
//     start killed a node (kill-mid-move): its FailoverNs is 0,
//     NoFailover is set and the summaries leave it out; it still
//     counts as a fault window, and as overlapping others.
//   - Throughput: ok sends per second over the time sends ran, and
//     outside windows per second of that time not in any window.
//     Latency: p50 and p99 (nearest rank) of ok sends invoked outside
//     every window.
type Measures struct {
	Acknowledged int `json:"acknowledged"`
	Attempted    int `json:"attempted"`

	Lost         int `json:"lost"`
	Unseen       int `json:"unseen"`
	Duplicated   int `json:"duplicated"`
	Reordered    int `json:"reordered"`
	Inconsistent int `json:"inconsistent_offsets"`
	Loss         int `json:"loss"`

	LostPerMillion         float64 `json:"lost_per_million"`
	UnseenPerMillion       float64 `json:"unseen_per_million"`
	DuplicatedPerMillion   float64 `json:"duplicated_per_million"`
	ReorderedPerMillion    float64 `json:"reordered_per_million"`
	InconsistentPerMillion float64 `json:"inconsistent_offsets_per_million"`
	LossPerMillion         float64 `json:"loss_per_million"`

	Availability        Ratio `json:"availability"`
	AvailabilityFaults  Ratio `json:"availability_during_faults"`
	AvailabilityOutside Ratio `json:"availability_outside_faults"`
	// WorstPartitionFaults is the availability during faults of the
	// partition that had the least, among those sent to at least
	// minPartitionSends times in faults, and which it is: a fault that
	// stops one partition of four hides in AvailabilityFaults.
	WorstPartitionFaults PartitionRatio `json:"worst_partition_availability_during_faults"`

	Faults []FaultMeasure `json:"faults,omitempty"`

	OKSendsPerSec        float64 `json:"ok_sends_per_sec"`
	OKSendsPerSecOutside float64 `json:"ok_sends_per_sec_outside_faults"`
	LatencyP50Ns         int64   `json:"send_latency_p50_ns_outside_faults"`
	LatencyP99Ns         int64   `json:"send_latency_p99_ns_outside_faults"`
}

// PartitionRatio is a partition's Ratio; Partition is empty when no
// partition qualified.
type PartitionRatio struct {
	Partition string `json:"partition,omitempty"`
	Ratio
}

// minPartitionSends is how many sends a partition needs during faults
// for its availability to count as the worst: fewer say little.
const minPartitionSends = 10

// Ratio is ok sends over sends attempted; Value is 0 when none was.
type Ratio struct {
	OK        int     `json:"ok"`
	Attempted int     `json:"attempted"`
	Value     float64 `json:"value"`
}

func (r *Ratio) add(ok bool) {
	r.Attempted++
	if ok {
		r.OK++
	}
	r.Value = float64(r.OK) / float64(r.Attempted)
}

// FaultMeasure is one fault window's figures.
type FaultMeasure struct {
	Nemesis string `json:"nemesis"`
	// Detail and StopDetail say what the fault's start and stop did.
	Detail       string `json:"detail,omitempty"`
	StopDetail   string `json:"stop_detail,omitempty"`
	StartNs      int64  `json:"start_ns"`
	EndNs        int64  `json:"end_ns"`
	Availability Ratio  `json:"availability"`
	// FailoverNs is the largest of FailoverByPartition, or -1 when a
	// partition never took an ok send after the fault started.
	FailoverNs          int64            `json:"failover_ns"`
	FailoverByPartition map[string]int64 `json:"failover_ns_by_partition"`
	// Overlapped says another fault began while this one's failover was
	// still under way (after its start, before its FailoverNs ran out, or
	// before its window's end when it never recovered): the time is then
	// both faults', not this one's. Summaries leave such faults out.
	Overlapped bool `json:"overlapped,omitempty"`
	// NoFailover marks a fault that took no node down (a membership
	// change that killed none): it has no failover time.
	NoFailover bool `json:"no_failover,omitempty"`
}

// window is a fault's span in the history, in ns; effect is when its
// start completed. failover says whether the fault measures one.
type window struct {
	nemesis            string
	start, effect, end int64
	failover           bool
	detail, stopDetail string
}

// membershipNemesis names the membership nemesis in histories.
const membershipNemesis = string(chaos.KindMembership)

// faultWindows lists the faults of h: each start's invocation to the
// completion of the next stop of the same nemesis, or the history's end.
func faultWindows(h History) []window {
	var out []window
	open := map[string]int{}
	end := int64(0)
	if len(h) > 0 {
		end = h[len(h)-1].Time
	}
	for _, op := range h {
		if op.Process != NemesisProcess {
			continue
		}
		switch {
		case op.F == FStart && op.Type == Invoke:
			if _, running := open[op.Nemesis]; !running {
				open[op.Nemesis] = len(out)
				out = append(out, window{nemesis: op.Nemesis, start: op.Time, effect: op.Time, end: end,
					failover: op.Nemesis != membershipNemesis})
			}
		case op.F == FStart:
			if i, ok := open[op.Nemesis]; ok {
				out[i].effect, out[i].detail = op.Time, op.Detail
				out[i].failover = out[i].failover || len(op.Nodes) > 0
			}
		case op.F == FStop && op.Type != Invoke:
			if i, ok := open[op.Nemesis]; ok {
				out[i].end, out[i].stopDetail = op.Time, op.Detail
				delete(open, op.Nemesis)
			}
		}
	}
	return out
}

func (w window) holds(t int64) bool { return t >= w.start && t < w.end }

// measure computes the Measures of an analyzed history and its checkers.
func measure(a *analysis, checkers []CheckerResult) Measures {
	count := func(name string) int {
		for _, c := range checkers {
			if c.Name == name {
				return c.Count
			}
		}
		return 0
	}
	m := Measures{
		Lost: count(CheckLostWrite), Unseen: count(CheckUnseen), Duplicated: count(CheckDuplicate),
		Reordered:    count(CheckNonmonotonicSend) + count(CheckNonmonotonicPoll),
		Inconsistent: count(CheckInconsistent),
	}
	m.Loss = m.Unseen + m.Inconsistent
	wins := faultWindows(a.h)
	m.Faults = make([]FaultMeasure, len(wins))
	for i, w := range wins {
		m.Faults[i] = FaultMeasure{Nemesis: w.nemesis, Detail: w.detail, StopDetail: w.stopDetail, StartNs: w.start, EndNs: w.end}
	}
	var outsideLat []int64
	inFaults := map[string]*Ratio{}
	first, last := int64(-1), int64(0)
	// Every send counts, a transaction's with its transaction's outcome
	// and times (analysis expands them), except those of transactions
	// meant to abort: a txn run's availability is that of records meant
	// to commit, its latency that of commits.
	for _, snd := range a.sends {
		p := snd.pair
		if meantToAbort(p) {
			continue // no availability to measure
		}
		ok := p.typ() == OK
		m.Availability.add(ok)
		if first < 0 || p.inv.Time < first {
			first = p.inv.Time
		}
		in := false
		for i, w := range wins {
			if w.holds(p.inv.Time) {
				in = true
				m.Faults[i].Availability.add(ok)
			}
		}
		if in {
			m.AvailabilityFaults.add(ok)
			tp := snd.v.TP().String()
			if inFaults[tp] == nil {
				inFaults[tp] = &Ratio{}
			}
			inFaults[tp].add(ok)
		} else {
			m.AvailabilityOutside.add(ok)
		}
		if ok {
			last = max(last, p.comp.Time)
			if !in {
				outsideLat = append(outsideLat, p.comp.Time-p.inv.Time)
			}
		}
	}
	m.Attempted, m.Acknowledged = m.Availability.Attempted, m.Availability.OK
	m.WorstPartitionFaults = worstPartition(inFaults)
	m.perMillion()
	m.failovers(a, wins)
	if span := last - first; first >= 0 && span > 0 {
		m.OKSendsPerSec = float64(m.Acknowledged) / (float64(span) / 1e9)
		if out := span - covered(wins, first, last); out > 0 {
			m.OKSendsPerSecOutside = float64(len(outsideLat)) / (float64(out) / 1e9)
		}
	}
	m.LatencyP50Ns, m.LatencyP99Ns = percentile(outsideLat, 50), percentile(outsideLat, 99)
	return m
}

// meantToAbort says p is a transaction its process meant to abort.
func meantToAbort(p pair) bool {
	return p.inv.Txn != nil && (p.inv.Txn.Abort || p.comp != nil && p.comp.Txn != nil && p.comp.Txn.Abort)
}

// worstPartition is the partition of least availability among those
// with at least minPartitionSends sends (ties: the first by name).
func worstPartition(rs map[string]*Ratio) PartitionRatio {
	var w PartitionRatio
	names := make([]string, 0, len(rs))
	for tp := range rs {
		names = append(names, tp)
	}
	slices.Sort(names)
	for _, tp := range names {
		r := rs[tp]
		if r.Attempted >= minPartitionSends && (w.Partition == "" || r.Value < w.Value) {
			w = PartitionRatio{Partition: tp, Ratio: *r}
		}
	}
	return w
}

func (m *Measures) perMillion() {
	if m.Acknowledged == 0 {
		return
	}
	pm := func(n int) float64 { return float64(n) * 1e6 / float64(m.Acknowledged) }
	m.LostPerMillion, m.UnseenPerMillion, m.DuplicatedPerMillion = pm(m.Lost), pm(m.Unseen), pm(m.Duplicated)
	m.ReorderedPerMillion, m.InconsistentPerMillion, m.LossPerMillion = pm(m.Reordered), pm(m.Inconsistent), pm(m.Loss)
}

// failovers fills in each fault's failover times.
func (m *Measures) failovers(a *analysis, wins []window) {
	var parts []TP
	for _, s := range a.sends {
		if tp := s.v.TP(); !slices.Contains(parts, tp) {
			parts = append(parts, tp)
		}
	}
	for i, w := range wins {
		fm := &m.Faults[i]
		fm.FailoverNs = 0
		if !w.failover {
			fm.NoFailover = true
			continue
		}
		fm.FailoverByPartition = map[string]int64{}
		for _, tp := range parts {
			d, tried := firstOKAfter(a, tp, w.start, w.effect)
			if !tried {
				continue // nothing was sent there after the fault began
			}
			fm.FailoverByPartition[tp.String()] = d
			if d < 0 || fm.FailoverNs < 0 {
				fm.FailoverNs = -1
			} else {
				fm.FailoverNs = max(fm.FailoverNs, d)
			}
		}
		fm.Overlapped = overlapped(wins, i, fm.FailoverNs)
	}
}

// overlapped reports whether a window other than wins[i] began after
// wins[i]'s start and before its failover (of failover ns, -1 for never:
// its window's end) was over.
func overlapped(wins []window, i int, failover int64) bool {
	w := wins[i]
	until := w.end
	if failover >= 0 {
		until = w.start + failover
	}
	for j, o := range wins {
		if j != i && o.start > w.start && o.start < until {
			return true
		}
	}
	return false
}

// IsolatedFailovers are the failover times of the faults that recovered
// and that no other fault overlapped, and the number of faults left out
// for overlapping.
func (m Measures) IsolatedFailovers() (ns []int64, overlapping int) {
	for _, f := range m.Faults {
		switch {
		case f.NoFailover:
		case f.Overlapped:
			overlapping++
		case f.FailoverNs >= 0:
			ns = append(ns, f.FailoverNs)
		}
	}
	return ns, overlapping
}

// firstOKAfter is the time from start to the completion of the first ok
// send to tp invoked at or after effect, or -1; tried says whether any
// send to tp was invoked then.
func firstOKAfter(a *analysis, tp TP, start, effect int64) (d int64, tried bool) {
	best := int64(-1)
	for _, s := range a.sends {
		if s.v.TP() != tp || s.inv.Time < effect {
			continue
		}
		tried = true
		if s.typ() != OK {
			continue
		}
		if d := s.comp.Time - start; best < 0 || d < best {
			best = d
		}
	}
	return best, tried
}

// covered is the length of the union of the windows within [from, to].
func covered(wins []window, from, to int64) int64 {
	ws := slices.Clone(wins)
	sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
	var total int64
	cur := from
	for _, w := range ws {
		s, e := max(w.start, cur), min(w.end, to)
		if e > s {
			total += e - s
			cur = e
		}
	}
	return total
}

// percentile is the nearest-rank p-th percentile of xs, 0 for none.
func percentile(xs []int64, p int) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// String is the one-line summary `raftq jepsen run` prints: loss per
// million acknowledged, availability in and out of faults, failover p50
// and max over the faults, throughput and latency outside faults.
func (m Measures) String() string {
	fo, overlapping := m.IsolatedFailovers()
	never := 0
	for _, f := range m.Faults {
		if f.FailoverNs < 0 {
			never++
		}
	}
	s := fmt.Sprintf("acknowledged=%d loss/M=%.0f lost/M=%.0f duplicated/M=%.0f reordered/M=%.0f inconsistent/M=%.0f "+
		"availability=%.3f during-faults=%.3f outside=%.3f",
		m.Acknowledged, m.LossPerMillion, m.LostPerMillion, m.DuplicatedPerMillion, m.ReorderedPerMillion,
		m.InconsistentPerMillion, m.Availability.Value, m.AvailabilityFaults.Value, m.AvailabilityOutside.Value)
	if len(m.Faults) > 0 {
		s += fmt.Sprintf(" failover-p50=%s failover-p99=%s failover-max=%s", time.Duration(percentile(fo, 50)),
			time.Duration(percentile(fo, 99)), time.Duration(slices.Max(append(fo, 0))))
		if overlapping > 0 {
			s += fmt.Sprintf(" failover-overlapped=%d", overlapping)
		}
		if never > 0 {
			s += fmt.Sprintf(" never-recovered=%d", never)
		}
	}
	return s + fmt.Sprintf(" ok-sends/s-outside=%.0f p50=%s p99=%s", m.OKSendsPerSecOutside,
		time.Duration(m.LatencyP50Ns), time.Duration(m.LatencyP99Ns))
}
