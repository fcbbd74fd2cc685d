package jepsen

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"path/filepath"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Matrix report files in MatrixConfig.Dir, beside matrix.md (and
// MatrixCostPlot).
const (
	MatrixIndex            = "matrix.html"
	MatrixLossAvailability = "loss-availability.png"
	MatrixCost             = "throughput-p99.png"
)

// modeColors tells the modes apart in the matrix plots, in MatrixModes'
// order; more modes reuse them with other glyphs.
var modeColors = []color.Color{
	color.RGBA{0x1b, 0x9e, 0x77, 0xff}, color.RGBA{0xd9, 0x5f, 0x02, 0xff}, color.RGBA{0x75, 0x70, 0xb3, 0xff},
	color.RGBA{0xe7, 0x29, 0x8a, 0xff}, color.RGBA{0x66, 0xa6, 0x1e, 0xff}, color.RGBA{0xe6, 0xab, 0x02, 0xff},
	color.RGBA{0xa6, 0x76, 0x1d, 0xff}, color.RGBA{0x66, 0x66, 0x66, 0xff},
}

var modeGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.CrossGlyph{}}

// plotMatrix draws one point per cell run of each mode, at x and y of
// its measures, and saves it to path.
func plotMatrix(title, xlabel, ylabel, path string, modes []Mode, cells []MatrixCell, xy func(*Measures) (float64, float64)) error {
	p := newPlot(title, xlabel, ylabel)
	for i, m := range modes {
		var pts plotter.XYs
		for _, c := range cells {
			if c.Mode == m.Name && c.Measures != nil {
				x, y := xy(c.Measures)
				pts = append(pts, plotter.XY{X: x, Y: y})
			}
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("plot %s %s: %w", title, m.Name, err)
		}
		s.GlyphStyle.Color = modeColors[i%len(modeColors)]
		s.GlyphStyle.Shape = modeGlyphs[(i/len(modeColors))%len(modeGlyphs)]
		s.GlyphStyle.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add(m.Name, s)
	}
	return save(p, path)
}

// writeMatrixReport writes the plots and matrix.html: the table with a
// link from every cell run to its own report (whose throughput plot is
// the cell's timeline of ok and failed sends, faults shaded), and the
// cost table.
func writeMatrixReport(dir string, modes []Mode, nemeses []Nemesis, res MatrixResult) error {
	plots, err := writeMatrixPlots(dir, modes, res)
	if err != nil {
		return err
	}
	type link struct {
		Text, Href string
	}
	type row struct {
		Mode  string
		Cells [][]link
	}
	d := struct {
		Nemeses       []Nemesis
		Modes         []Mode
		Rows          []row
		Plots         []string
		Disagreements []string
		Cost          *costTable
		CostDirs      []string
	}{Nemeses: nemeses, Modes: modes, Plots: plots}
	for _, m := range modes {
		r := row{Mode: m.Name}
		for _, n := range nemeses {
			var ls []link
			for _, c := range res.Cells {
				if c.Mode == m.Name && c.Nemesis == n.Name {
					ls = append(ls, link{Text: c.cellText(), Href: filepath.ToSlash(filepath.Join(c.Dir, IndexFile))})
				}
			}
			r.Cells = append(r.Cells, ls)
		}
		d.Rows = append(d.Rows, r)
	}
	d.Disagreements = disagreements(res.Cells)
	if len(res.Cost) > 0 {
		t := makeCostTable(res.Cost)
		d.Cost = &t
		for _, r := range res.Cost {
			d.CostDirs = append(d.CostDirs, r.Dir)
		}
	}
	return writeFile(filepath.Join(dir, MatrixIndex), func(w io.Writer) error { return matrixTmpl.Execute(w, d) })
}

// writeMatrixPlots draws the cells' plots (when there are cells) and the
// cost rows' (when some row has the figures), and returns their files.
func writeMatrixPlots(dir string, modes []Mode, res MatrixResult) ([]string, error) {
	var plots []string
	if len(res.Cells) > 0 {
		err := plotMatrix("Loss against availability, one point per cell run", "availability during faults (ok sends / sends)",
			"acknowledged writes lost per million", filepath.Join(dir, MatrixLossAvailability), modes, res.Cells,
			func(m *Measures) (float64, float64) { return m.AvailabilityFaults.Value, m.LossPerMillion })
		if err != nil {
			return nil, err
		}
		err = plotMatrix("Cost outside faults, one point per cell run", "ok sends/s outside faults", "p99 send latency outside faults (ms)",
			filepath.Join(dir, MatrixCost), modes, res.Cells,
			func(m *Measures) (float64, float64) { return m.OKSendsPerSecOutside, float64(m.LatencyP99Ns) / 1e6 })
		if err != nil {
			return nil, err
		}
		plots = append(plots, MatrixLossAvailability, MatrixCost)
	}
	if len(res.Cost) == 0 {
		return plots, nil
	}
	drawn, err := plotCost(filepath.Join(dir, MatrixCostPlot), modes, res.Cost)
	if drawn {
		plots = append(plots, MatrixCostPlot)
	}
	return plots, err
}

var matrixTmpl = template.Must(template.New("matrix").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>raftq replication-mode matrix</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:90%}</style>
</head><body>
<h1>raftq replication-mode matrix</h1>
{{if .Nemeses}}<table><tr><th>mode</th>{{range .Nemeses}}<th>{{.Name}} ({{.Nodes}} nodes)</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Mode}}</th>{{range .Cells}}<td>{{range .}}<a href="{{.Href}}">{{.Text}}</a><br>{{end}}</td>{{end}}</tr>
{{end}}</table>
<p>Each cell: the checkers' verdict, the measured class (L: acknowledged writes lost; U: a fault kept a partition from an ok send for half its length and at least 5 s; ok), loss per million acknowledged, availability during faults (all partitions, and the worst), failover p50 (and max) over the faults no other fault overlapped (and the max of those overlapped), and ISR-NOTES §4.3's expected outcome. Each links to the cell's report: its throughput plot is the timeline of ok and failed sends with the faults shaded.</p>
{{end}}<ul>{{range .Modes}}<li>{{.Name}}: {{.Doc}}</li>{{end}}{{range .Nemeses}}<li>{{.Name}}: {{.Doc}}</li>{{end}}</ul>
{{if .Disagreements}}<h2>Disagreements and failed runs</h2><ul>{{range .Disagreements}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{with .Cost}}<h2>Cost</h2>
<p>{{.Preface}}</p>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $v := .}}{{if eq $i 0}}<th>{{$v}}</th>{{else}}<td style="text-align:right">{{$v}}</td>{{end}}{{end}}</tr>
{{end}}</table>
<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
<p>The clusters' logs: {{range $.CostDirs}}<a href="{{.}}/cluster/">{{.}}</a> {{end}}</p>
{{end}}<h2>Plots</h2>
{{range .Plots}}<p><img src="{{.}}" alt="{{.}}"></p>{{end}}
</body></html>
`))
