package jepsen

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdict is a checker's finding.
type Verdict string

// The three verdicts. Unknown means the checker could not decide: a
// porcupine search timed out, or a final read that would have settled the
// question did not complete. Unknown is never reported as ok.
const (
	VerdictOK      Verdict = "ok"
	VerdictFail    Verdict = "fail"
	VerdictUnknown Verdict = "unknown"
)

// Checker names, as in results.json and Jepsen.
const (
	CheckLostWrite        = "lost-write"
	CheckUnseen           = "unseen"
	CheckDuplicate        = "duplicate"
	CheckInconsistent     = "inconsistent-offsets"
	CheckNonmonotonicSend = "nonmonotonic-send"
	CheckNonmonotonicPoll = "nonmonotonic-poll"
	CheckPollSkip         = "poll-skip"
	CheckG1a              = "G1a"
	CheckLinearizable     = "linearizable"
	// The transaction checkers, run only on histories with txn ops.
	CheckUncommittedRead = "uncommitted-read"
	CheckG1b             = "G1b"
	CheckG0              = "G0"
	CheckG1c             = "G1c"
	CheckG1cRealtime     = "G1c-realtime"
)

const (
	defaultMaxExamples     = 8
	defaultLinTimeout      = 30 * time.Second
	defaultUnseenMaxPoints = 2000
)

// PlainCheckerNames lists the checkers of a history without txn ops, in
// the order results report them.
var PlainCheckerNames = []string{
	CheckLostWrite, CheckUnseen, CheckDuplicate, CheckInconsistent,
	CheckNonmonotonicSend, CheckNonmonotonicPoll, CheckPollSkip, CheckG1a,
	CheckLinearizable,
}

// TxnCheckerNames lists the checkers of a history with txn ops, in the
// order results report them: PlainCheckerNames' first eight (linearizable
// is left out), then the transaction checkers.
var TxnCheckerNames = append(slices.Clone(PlainCheckerNames[:8]),
	CheckUncommittedRead, CheckG1b, CheckG0, CheckG1c, CheckG1cRealtime)

// CheckerNames lists every checker, those of plain histories first, then
// those only transactional histories get. CheckConfig.Allowed may name
// any of them.
var CheckerNames = append(slices.Clone(PlainCheckerNames), TxnCheckerNames[8:]...)

// CheckConfig tunes Check.
type CheckConfig struct {
	// LinearizabilityTimeout bounds porcupine's search per partition; a
	// partition that runs out of time is unknown.
	LinearizabilityTimeout time.Duration
	// SkipLinearizability turns the porcupine checker off (its verdict is
	// then unknown).
	SkipLinearizability bool
	// MaxExamples bounds the anomalies each checker lists.
	MaxExamples int
	// Allowed names checkers whose failures are reported but do not make
	// the run invalid, as Jepsen allows poll-skip and nonmonotonic-poll with
	// consumer groups.
	Allowed []string
}

// DefaultCheckConfig returns the checker settings used by `raftq jepsen run`.
func DefaultCheckConfig() CheckConfig {
	return CheckConfig{LinearizabilityTimeout: defaultLinTimeout, MaxExamples: defaultMaxExamples}
}

// ErrBadConfig is wrapped by every configuration error in this package.
var ErrBadConfig = errors.New("jepsen: bad config")

// Validate reports a setting out of range.
func (c CheckConfig) Validate() error {
	if c.LinearizabilityTimeout <= 0 && !c.SkipLinearizability {
		return fmt.Errorf("linearizability timeout %s must be positive: %w", c.LinearizabilityTimeout, ErrBadConfig)
	}
	if c.MaxExamples < 0 {
		return fmt.Errorf("max examples %d: %w", c.MaxExamples, ErrBadConfig)
	}
	for _, n := range c.Allowed {
		if !slices.Contains(CheckerNames, n) {
			return fmt.Errorf("allowed checker %q does not exist: %w", n, ErrBadConfig)
		}
	}
	return nil
}

// Anomaly is one concrete example a checker found.
type Anomaly struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Value     string   `json:"value,omitempty"`
	Values    []string `json:"values,omitempty"`
	Offsets   []int64  `json:"offsets,omitempty"`
	Process   int      `json:"process"`
	// Ops are the indexes of the history ops that show the anomaly.
	Ops    []int64 `json:"ops,omitempty"`
	Detail string  `json:"detail"`
}

// CheckerResult is one checker's verdict, its counts and a few examples.
type CheckerResult struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	// Count is the number of anomalies found.
	Count int `json:"count"`
	// Counts breaks Count (and undecided cases) down, e.g. per partition.
	Counts   map[string]int `json:"counts,omitempty"`
	Examples []Anomaly      `json:"examples,omitempty"`
	// Allowed marks a failure that does not invalidate the run.
	Allowed bool   `json:"allowed,omitempty"`
	Note    string `json:"note,omitempty"`
}

// UnseenPoint is the number of acknowledged sends no read had returned yet
// at Time (ns since the run started).
type UnseenPoint struct {
	Time   int64 `json:"time"`
	Unseen int   `json:"unseen"`
}

// PartitionLinearizability is porcupine's finding for one partition.
type PartitionLinearizability struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Verdict   Verdict `json:"verdict"`
	Ops       int     `json:"ops"`
	// Visualization is the report file with porcupine's visualization,
	// set by Run and Recheck for partitions that are not linearizable.
	Visualization string `json:"visualization,omitempty"`
}

// Stats counts the history's client operations.
type Stats struct {
	Ops int `json:"ops"`
	// ByF counts completions by f and type, e.g. ByF["send"]["ok"].
	ByF map[F]map[Type]int `json:"by_f"`
	// DurationNs is the time of the last op.
	DurationNs int64 `json:"duration_ns"`
	// OKSendsPerSec is the ok sends over the time sends ran; OKOpsPerSec
	// is all ok client ops over the whole history.
	OKSendsPerSec float64  `json:"ok_sends_per_sec"`
	OKOpsPerSec   float64  `json:"ok_ops_per_sec"`
	Nemeses       []string `json:"nemeses,omitempty"`
}

// Results is the outcome of Check.
type Results struct {
	// Valid is false when a checker that is not allowed to fail failed.
	Valid bool `json:"valid"`
	// Verdict is fail when the run is invalid, unknown when some checker
	// could not decide, else ok.
	Verdict         Verdict                    `json:"verdict"`
	Checkers        []CheckerResult            `json:"checkers"`
	Stats           Stats                      `json:"stats"`
	Unseen          []UnseenPoint              `json:"unseen_series,omitempty"`
	Linearizability []PartitionLinearizability `json:"linearizability,omitempty"`
	// Measures are the figures the replication-mode matrix compares.
	Measures Measures `json:"measures"`
	// Setup is what the run ran against, when the run said (Config.Setup);
	// Recheck keeps the one results.json had.
	Setup *Setup `json:"setup,omitempty"`

	lin map[TP]*linResult // porcupine's data for visualizations
}

// Checker returns the named checker's result, or nil.
func (r *Results) Checker(name string) *CheckerResult {
	for i := range r.Checkers {
		if r.Checkers[i].Name == name {
			return &r.Checkers[i]
		}
	}
	return nil
}

// Summary is the one-line verdict: the overall verdict, the failed and
// unknown checkers with counts, and throughput.
func (r *Results) Summary() string {
	var fails, unknowns []string
	for _, c := range r.Checkers {
		switch c.Verdict {
		case VerdictFail:
			s := fmt.Sprintf("%s=%d", c.Name, c.Count)
			if c.Allowed {
				s += "(allowed)"
			}
			fails = append(fails, s)
		case VerdictUnknown:
			unknowns = append(unknowns, c.Name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d ops, %.0f ok sends/s", r.Verdict, r.Stats.Ops, r.Stats.OKSendsPerSec)
	if len(fails) > 0 {
		fmt.Fprintf(&b, "; anomalies: %s", strings.Join(fails, " "))
	}
	if len(unknowns) > 0 {
		fmt.Fprintf(&b, "; unknown: %s", strings.Join(unknowns, " "))
	}
	return b.String()
}

// finding accumulates one checker's anomalies.
type finding struct {
	res   CheckerResult
	limit int // examples kept
}

func newFinding(name string, limit int) *finding {
	return &finding{res: CheckerResult{Name: name, Verdict: VerdictOK, Counts: map[string]int{}}, limit: limit}
}

// flag counts an anomaly under key and keeps it as an example while there
// is room.
func (f *finding) flag(key string, an Anomaly) {
	f.res.Count++
	f.res.Counts[key]++
	f.res.Verdict = VerdictFail
	if len(f.res.Examples) < f.limit {
		f.res.Examples = append(f.res.Examples, an)
	}
}

// undecided counts a case the checker cannot settle.
func (f *finding) undecided(key string) {
	f.res.Counts[key]++
	if f.res.Verdict == VerdictOK {
		f.res.Verdict = VerdictUnknown
	}
}

func (f *finding) result() CheckerResult {
	if len(f.res.Counts) == 0 {
		f.res.Counts = nil
	}
	return f.res
}
