package jepsen

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// MatrixCostPlot is the cost rows' plot in MatrixConfig.Dir: each mode's
// records/s at 100 B against its p99 at the fixed rate.
const MatrixCostPlot = "cost-throughput-p99.png"

// costTable is the cost table, for matrix.md and matrix.html alike.
type costTable struct {
	Preface string
	Header  []string
	Rows    [][]string
	// Notes are each mode's setup line and each failure.
	Notes []string
}

// makeCostTable lays out rows: a row per mode with records/s at 100 B,
// records/s and MB/s at 1 KiB, and the records/s, p50 and p99 at the
// fixed rate.
func makeCostTable(rows []CostRow) costTable {
	t := costTable{Preface: costPreface(rows), Header: []string{"mode", "100 B records/s", "1 KiB records/s", "1 KiB MB/s",
		fmt.Sprintf("100 B at %s/s: records/s", thousands(fixedRate(rows))), "p50 ms", "p99 ms"}}
	for _, r := range rows {
		s, l, f := r.Figures(CostSmall), r.Figures(CostLarge), r.Figures(CostFixed)
		t.Rows = append(t.Rows, []string{r.Mode, figure(s, rps), figure(l, rps), figure(l, mbps),
			figure(f, rps), figure(f, func(f *CostFigures) string { return ms(f.P50ms) }), figure(f, func(f *CostFigures) string { return ms(f.P99ms) })})
	}
	for _, r := range rows {
		if s := r.Setup(); len(s) > 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("%s: %s", r.Mode, setupLine(s)))
		}
	}
	for _, r := range rows {
		t.Notes = append(t.Notes, r.problems()...)
	}
	return t
}

// costPreface says how the rows were measured, from the first row that
// has loads.
func costPreface(rows []CostRow) string {
	i := slices.IndexFunc(rows, func(r CostRow) bool { return len(r.Loads) > 0 })
	if i < 0 {
		return "No mode was measured."
	}
	r, l := rows[i], rows[i].Loads[0].Load
	prod := 1
	if m := r.Measure(CostFixed); m != nil {
		prod = m.Load.Producers
	}
	return fmt.Sprintf("raftq bench on a fresh %d-node cluster per mode, each load on a fresh topic of %d partitions "+
		"(replication factor %d unless the mode says otherwise), acks=all, idempotent producers: %d at full speed, %d at the fixed rate; "+
		"%s measured after a %s warm-up.", r.Nodes, l.Partitions, min(3, r.Nodes), l.Producers, prod, l.Duration, l.Warmup)
}

// fixedRate is the rate of the first fixed-rate load in rows.
func fixedRate(rows []CostRow) float64 {
	for _, r := range rows {
		if m := r.Measure(CostFixed); m != nil {
			return m.Load.Rate
		}
	}
	return 0
}

// problems lists what went wrong in the row's run.
func (r CostRow) problems() []string {
	var out []string
	if r.Err != "" {
		out = append(out, fmt.Sprintf("%s did not run through: %s", r.Mode, firstLine(r.Err)))
	}
	if r.Crashes > 0 {
		out = append(out, fmt.Sprintf("%s: %d node crashes", r.Mode, r.Crashes))
	}
	for _, m := range r.Loads {
		switch f := m.Figures; {
		case m.Err != "":
			out = append(out, fmt.Sprintf("%s %s: %s", r.Mode, m.Load.Name, firstLine(m.Err)))
		case f != nil && (f.Failed > 0 || f.Unanswered > 0):
			out = append(out, fmt.Sprintf("%s %s: %d records failed, %d unanswered", r.Mode, m.Load.Name, f.Failed, f.Unanswered))
		}
	}
	return out
}

// String is the row in one line, for the terminal.
func (r CostRow) String() string {
	s, l, f := r.Figures(CostSmall), r.Figures(CostLarge), r.Figures(CostFixed)
	line := fmt.Sprintf("%s: 100 B %s records/s · 1 KiB %s records/s (%s MB/s) · fixed rate %s records/s, p50 %s ms, p99 %s ms",
		r.Mode, figure(s, rps), figure(l, rps), figure(l, mbps), figure(f, rps),
		figure(f, func(f *CostFigures) string { return ms(f.P50ms) }), figure(f, func(f *CostFigures) string { return ms(f.P99ms) }))
	if p := r.problems(); len(p) > 0 {
		line += "; " + strings.Join(p, "; ")
	}
	return line
}

func figure(f *CostFigures, text func(*CostFigures) string) string {
	if f == nil {
		return "-"
	}
	return text(f)
}

func rps(f *CostFigures) string  { return thousands(f.RecordsPerS) }
func mbps(f *CostFigures) string { return strconv.FormatFloat(f.MBPerS, 'f', 1, 64) }
func ms(v float64) string        { return strconv.FormatFloat(v, 'f', 2, 64) }

// thousands prints f rounded, with commas: 1,103,224.
func thousands(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// setupLine prints a setup as key=value pairs in key order, as raftq
// bench does.
func setupLine(setup map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(setup)) {
		kv = append(kv, k+"="+setup[k])
	}
	return strings.Join(kv, " ")
}

// WriteCostTable writes the cost rows as a Markdown section (nothing
// without rows).
func WriteCostTable(w io.Writer, rows []CostRow) error {
	if len(rows) == 0 {
		return nil
	}
	t := makeCostTable(rows)
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Cost\n\n%s\n\n| %s |\n|%s\n", t.Preface, strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(r, " | "))
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
	}
	for _, n := range t.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plotCost draws each mode's records/s at 100 B against its p99 at the
// fixed rate, and saves it to path. It reports false, saving nothing,
// when no row has both.
func plotCost(path string, modes []Mode, rows []CostRow) (bool, error) {
	p := newPlot(fmt.Sprintf("Cost, one point per mode (raftq bench, %d nodes)", rows[0].Nodes),
		"records/s of 100 B at full speed", fmt.Sprintf("p99 latency at %s records/s (ms)", thousands(fixedRate(rows))))
	p.Legend.Left = true // the fast modes sit on the right
	var top plotter.XY
	for i, m := range modes {
		j := slices.IndexFunc(rows, func(r CostRow) bool { return r.Mode == m.Name })
		if j < 0 || rows[j].Figures(CostSmall) == nil || rows[j].Figures(CostFixed) == nil {
			continue
		}
		xy := plotter.XY{X: rows[j].Figures(CostSmall).RecordsPerS, Y: rows[j].Figures(CostFixed).P99ms}
		top = plotter.XY{X: max(top.X, xy.X), Y: max(top.Y, xy.Y)}
		s, err := plotter.NewScatter(plotter.XYs{xy})
		if err != nil {
			return false, fmt.Errorf("plot cost %s: %w", m.Name, err)
		}
		s.GlyphStyle.Color = modeColors[i%len(modeColors)]
		s.GlyphStyle.Shape = modeGlyphs[(i/len(modeColors))%len(modeGlyphs)]
		s.GlyphStyle.Radius = vg.Points(5)
		p.Add(s)
		p.Legend.Add(m.Name, s)
	}
	if top == (plotter.XY{}) {
		return false, nil
	}
	// From zero, so that the distances between modes read as ratios.
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, top.X*1.1, 0, top.Y*1.15
	return true, save(p, path)
}
