package jepsen

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// nemesisInterval is when one fault was active, in seconds since the run
// started: from its start's invocation to its stop's completion (or the
// end of the history when it was never stopped).
type nemesisInterval struct {
	Name       string
	Start, End float64
}

func nemesisIntervals(h History) []nemesisInterval {
	var out []nemesisInterval
	for _, w := range faultWindows(h) {
		out = append(out, nemesisInterval{Name: w.nemesis, Start: secs(w.start), End: secs(w.end)})
	}
	return out
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

var typeColors = map[Type]color.Color{
	OK:   color.RGBA{0x2c, 0x7b, 0xb6, 0xff},
	Fail: color.RGBA{0xd7, 0x19, 0x1c, 0xff},
	Info: color.RGBA{0xfd, 0xae, 0x61, 0xff},
}

var fShapes = map[F]draw.GlyphDrawer{
	FSend: draw.CircleGlyph{}, FPoll: draw.TriangleGlyph{}, FFinalRead: draw.SquareGlyph{},
}

// plotFs are the client functions plotted, in legend order.
var plotFs = []F{FSend, FPoll, FAssign, FSubscribe, FCrash, FFinalRead}

// maxScatterPoints bounds each scatter series; larger ones are thinned
// evenly so plots stay fast and readable.
const maxScatterPoints = 20000

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// shade draws the nemesis intervals as translucent bands between lo and hi.
func shade(p *plot.Plot, ivs []nemesisInterval, lo, hi float64) error {
	palette := []color.NRGBA{{255, 0, 0, 36}, {0, 160, 0, 36}, {128, 0, 255, 36}, {255, 140, 0, 36}}
	seen := map[string]int{}
	for _, iv := range ivs {
		ci, ok := seen[iv.Name]
		if !ok {
			ci = len(seen)
			seen[iv.Name] = ci
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: iv.Start, Y: lo}, {X: iv.End, Y: lo}, {X: iv.End, Y: hi}, {X: iv.Start, Y: hi}})
		if err != nil {
			return fmt.Errorf("shade %s: %w", iv.Name, err)
		}
		poly.Color = palette[ci%len(palette)]
		poly.LineStyle.Width = 0
		p.Add(poly)
		if !ok {
			p.Legend.Add("nemesis "+iv.Name, poly)
		}
	}
	return nil
}

// latencyPoints returns, per f and type, (invocation time s, latency ms)
// of completed client ops.
func latencyPoints(h History) map[F]map[Type]plotter.XYs {
	out := map[F]map[Type]plotter.XYs{}
	pairs, err := pairOps(h)
	if err != nil {
		return out
	}
	for _, p := range pairs {
		if p.inv.Process == NemesisProcess || p.comp == nil {
			continue
		}
		if out[p.inv.F] == nil {
			out[p.inv.F] = map[Type]plotter.XYs{}
		}
		ms := math.Max(float64(p.comp.Time-p.inv.Time)/1e6, 1e-3) // log scale needs > 0
		out[p.inv.F][p.comp.Type] = append(out[p.inv.F][p.comp.Type], plotter.XY{X: secs(p.inv.Time), Y: ms})
	}
	return out
}

func thin(xys plotter.XYs, n int) plotter.XYs {
	if len(xys) <= n {
		return xys
	}
	out := make(plotter.XYs, 0, n)
	for i := range n {
		out = append(out, xys[i*len(xys)/n])
	}
	return out
}

func plotLatency(h History, path string) error {
	p := newPlot("Latency by invocation time", "time (s)", "latency (ms)")
	pts := latencyPoints(h)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, byType := range pts {
		for _, xys := range byType {
			for _, xy := range xys {
				lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
			}
		}
	}
	if lo > hi {
		lo, hi = 1, 10
	}
	hi = math.Max(hi, lo*10) // a log axis needs a positive, non-empty range
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if err := shade(p, nemesisIntervals(h), lo, hi); err != nil {
		return err
	}
	for _, f := range plotFs {
		for _, t := range []Type{OK, Fail, Info} {
			xys := pts[f][t]
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(thin(xys, maxScatterPoints))
			if err != nil {
				return fmt.Errorf("latency %s %s: %w", f, t, err)
			}
			sc.GlyphStyle.Color = typeColors[t]
			sc.GlyphStyle.Radius = vg.Points(1.5)
			if shape, ok := fShapes[f]; ok {
				sc.GlyphStyle.Shape = shape
			} else {
				sc.GlyphStyle.Shape = draw.CrossGlyph{}
			}
			p.Add(sc)
			p.Legend.Add(fmt.Sprintf("%s %s", f, t), sc)
		}
	}
	p.Y.Min, p.Y.Max = lo, hi
	return save(p, path)
}

// throughputBucket picks a bucket width: about 100 buckets a run, at
// least 100ms.
func throughputBucket(h History) int64 {
	if len(h) == 0 {
		return int64(time.Second)
	}
	return max(int64(100*time.Millisecond), h[len(h)-1].Time/100)
}

// throughputSeries counts completions per second by f and type, in
// buckets of the given width.
func throughputSeries(h History, bucket int64) (map[F]map[Type]plotter.XYs, float64) {
	counts := map[F]map[Type]map[int64]int{}
	last := int64(0)
	for _, op := range h {
		if op.Type == Invoke || op.Process == NemesisProcess {
			continue
		}
		b := op.Time / bucket
		last = max(last, b)
		if counts[op.F] == nil {
			counts[op.F] = map[Type]map[int64]int{}
		}
		if counts[op.F][op.Type] == nil {
			counts[op.F][op.Type] = map[int64]int{}
		}
		counts[op.F][op.Type][b]++
	}
	width := secs(bucket)
	out := map[F]map[Type]plotter.XYs{}
	peak := 1.0
	for f, byType := range counts {
		out[f] = map[Type]plotter.XYs{}
		for t, buckets := range byType {
			xys := make(plotter.XYs, 0, last+1)
			for b := int64(0); b <= last; b++ {
				rate := float64(buckets[b]) / width
				xys = append(xys, plotter.XY{X: (float64(b) + 0.5) * width, Y: rate})
				peak = math.Max(peak, rate)
			}
			out[f][t] = xys
		}
	}
	return out, peak
}

// fDashes tells the functions apart on the throughput plot.
var fDashes = map[F][]vg.Length{
	FPoll:      {vg.Points(5), vg.Points(3)},
	FAssign:    {vg.Points(1), vg.Points(3)},
	FSubscribe: {vg.Points(1), vg.Points(3)},
	FCrash:     {vg.Points(8), vg.Points(2), vg.Points(1), vg.Points(2)},
	FFinalRead: {vg.Points(2), vg.Points(2)},
}

func plotThroughput(h History, path string) error {
	bucket := throughputBucket(h)
	p := newPlot(fmt.Sprintf("Throughput (completions/s, %.1fs buckets)", secs(bucket)), "time (s)", "ops/s")
	series, peak := throughputSeries(h, bucket)
	if err := shade(p, nemesisIntervals(h), 0, peak); err != nil {
		return err
	}
	for _, f := range plotFs {
		for _, t := range []Type{OK, Fail, Info} {
			xys := series[f][t]
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("throughput %s %s: %w", f, t, err)
			}
			l.Color = typeColors[t]
			l.Width = vg.Points(1.2)
			l.Dashes = fDashes[f]
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s", f, t), l)
		}
	}
	return save(p, path)
}

func plotUnseen(h History, series []UnseenPoint, path string) error {
	p := newPlot("Acknowledged sends not yet read", "time (s)", "unseen sends")
	xys := make(plotter.XYs, 0, len(series)+1)
	xys = append(xys, plotter.XY{})
	peak := 1.0
	for _, pt := range series {
		xys = append(xys, plotter.XY{X: secs(pt.Time), Y: float64(pt.Unseen)})
		peak = math.Max(peak, float64(pt.Unseen))
	}
	if err := shade(p, nemesisIntervals(h), 0, peak); err != nil {
		return err
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("unseen: %w", err)
	}
	l.Color = typeColors[OK]
	p.Add(l)
	p.Legend.Add("unseen", l)
	return save(p, path)
}

func save(p *plot.Plot, path string) error {
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// sortedFs lists the fs of a map for stable output.
func sortedFs[V any](m map[F]V) []F {
	fs := make([]F, 0, len(m))
	for f := range m {
		fs = append(fs, f)
	}
	slices.Sort(fs)
	return fs
}
