package jepsen

import (
	"fmt"
	"slices"
)

// Check runs every checker over h and returns their verdicts. It fails
// only when h is malformed (an error wrapping ErrMalformed) or cfg is bad.
func Check(h History, cfg CheckConfig) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a, err := analyze(h)
	if err != nil {
		return nil, fmt.Errorf("check history: %w", err)
	}
	limit := cfg.MaxExamples
	streams := a.streams()
	res := &Results{Stats: stats(a)}
	unseen, series := checkUnseen(a, limit)
	res.Unseen = series
	res.Checkers = []CheckerResult{
		checkLostWrite(a, a.coverage(streams), limit),
		unseen,
		checkDuplicate(a, limit),
		checkInconsistentOffsets(a, limit),
		checkNonmonotonicSend(a, limit),
		checkNonmonotonicPoll(streams, limit),
		checkPollSkip(a, streams, limit),
		checkG1a(a, limit),
	}
	res.lin = map[TP]*linResult{}
	if len(a.txns) > 0 {
		// Porcupine's model is a log dense from 0 whose appends become
		// visible at once; transactions leave gaps (markers, aborted
		// records) and become visible at commit, so it does not apply.
		res.Checkers = append(res.Checkers, checkTxns(a, limit)...)
	} else {
		var lin []*linResult
		if !cfg.SkipLinearizability {
			lin = checkLinearizable(a, cfg.LinearizabilityTimeout)
		}
		linRes, parts := linFinding(lin, cfg.SkipLinearizability, limit)
		res.Checkers = append(res.Checkers, linRes)
		res.Linearizability = parts
		for _, r := range lin {
			res.lin[r.tp] = r
		}
	}
	res.decide(cfg.Allowed)
	res.Measures = measure(a, res.Checkers)
	return res, nil
}

// decide sets Valid and Verdict from the checkers' verdicts.
func (r *Results) decide(allowed []string) {
	r.Valid, r.Verdict = true, VerdictOK
	unknown := false
	for i := range r.Checkers {
		c := &r.Checkers[i]
		switch c.Verdict {
		case VerdictFail:
			if slices.Contains(allowed, c.Name) {
				c.Allowed = true
				continue
			}
			r.Valid = false
		case VerdictUnknown:
			unknown = true
		}
	}
	switch {
	case !r.Valid:
		r.Verdict = VerdictFail
	case unknown:
		r.Verdict = VerdictUnknown
	}
}

func stats(a *analysis) Stats {
	s := Stats{ByF: map[F]map[Type]int{}}
	okOps, okSends := 0, 0
	first, last := int64(infinity), int64(0)
	var nemeses []string
	for _, p := range a.pairs {
		if p.inv.Process == NemesisProcess {
			if p.inv.F == FStart && !slices.Contains(nemeses, p.inv.Nemesis) {
				nemeses = append(nemeses, p.inv.Nemesis)
			}
			continue
		}
		s.Ops++
		t := p.typ()
		if s.ByF[p.inv.F] == nil {
			s.ByF[p.inv.F] = map[Type]int{}
		}
		s.ByF[p.inv.F][t]++
		if t == OK {
			okOps++
		}
		switch p.inv.F {
		case FSend:
			first = min(first, p.inv.Time)
			if t == OK {
				okSends++
				last = max(last, p.comp.Time)
			}
		case FTxn:
			// A committed txn's sends count as ok sends, at its commit.
			first = min(first, p.inv.Time)
			if t == OK && p.comp.Txn != nil && len(p.comp.Txn.Sends) > 0 {
				okSends += len(p.comp.Txn.Sends)
				last = max(last, p.comp.Time)
			}
		}
	}
	s.Nemeses = nemeses
	if n := len(a.h); n > 0 {
		s.DurationNs = a.h[n-1].Time
	}
	if secs := float64(s.DurationNs) / 1e9; secs > 0 {
		s.OKOpsPerSec = float64(okOps) / secs
	}
	if secs := float64(last-first) / 1e9; okSends > 0 && secs > 0 {
		s.OKSendsPerSec = float64(okSends) / secs
	}
	return s
}
