package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/raftq/raftq/broker"
)

// overview is the data of the / page.
type overview struct {
	Cluster   clusterView
	Groups    []groupView
	GroupsErr string
	Reports   []reportView
	ReportErr string
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	o := overview{Cluster: c.gather(ctx)}
	var err error
	if o.Groups, err = c.groups(ctx); err != nil {
		o.GroupsErr = err.Error()
	}
	if o.Reports, err = c.reports(); err != nil {
		o.ReportErr = err.Error()
	}
	c.render(w, r, "overview", "raftq "+o.Cluster.ClusterID, o)
}

// topicPage is the data of /topics/{topic}.
type topicPage struct {
	Cluster clusterView
	Topic   topicView
}

func (c *Console) serveTopic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cv := c.gather(ctx)
	t, ok := cv.topic(r.PathValue("topic"))
	if !ok && cv.Err == "" {
		http.Error(w, fmt.Sprintf("topic %q does not exist (or no node this one reaches hosts it)", r.PathValue("topic")), http.StatusNotFound)
		return
	}
	c.render(w, r, "topic", "topic "+t.Name, topicPage{cv, t})
}

// partitionPage is the data of /topics/{topic}/{partition}.
type partitionPage struct {
	Cluster    clusterView
	Part       partView
	Records    []recordView
	RecordsErr string
	From       int64
}

func (c *Console) servePartition(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cv := c.gather(ctx)
	t, ok := cv.topic(r.PathValue("topic"))
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if !ok || err != nil || p < 0 || int(p) >= len(t.Partitions) {
		http.Error(w, fmt.Sprintf("topic %q has no partition %q that this node knows of", r.PathValue("topic"), r.PathValue("partition")), http.StatusNotFound)
		return
	}
	pp := partitionPage{Cluster: cv, Part: t.Partitions[p]}
	pp.From = max(pp.Part.LogStart, pp.Part.HW-int64(c.cfg.Records))
	if pp.Records, err = c.lastRecords(ctx, t.Name, int32(p), pp.From, pp.Part.HW); err != nil {
		pp.RecordsErr = err.Error()
	}
	c.render(w, r, "partition", fmt.Sprintf("%s-%d", t.Name, p), pp)
}

func (c *Console) serveGroup(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	gs, err := c.groups(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for _, g := range gs {
		if g.Name == r.PathValue("group") {
			c.render(w, r, "group", "group "+g.Name, g)
			return
		}
	}
	http.Error(w, fmt.Sprintf("group %q does not exist", r.PathValue("group")), http.StatusNotFound)
}

func (c *Console) serveReports(w http.ResponseWriter, r *http.Request) {
	if c.cfg.ReportsDir == "" {
		http.Error(w, "no --reports-dir given to this node", http.StatusNotFound)
		return
	}
	rs, err := c.reports()
	o := overview{Reports: rs}
	if err != nil {
		o.ReportErr = err.Error()
	}
	c.render(w, r, "reports", "jepsen reports", o)
}

var funcs = template.FuncMap{
	"spark":      sparkline,
	"rate":       formatRate,
	"bytes":      formatBytes,
	"ids":        formatIDs,
	"ts":         func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"pathEscape": url.PathEscape,
	"list":       func(p partView) []partView { return []partView{p} },
	"leads": func(s broker.Status) int {
		n := 0
		for _, p := range s.Partitions {
			if p.Role == "leader" {
				n++
			}
		}
		return n
	},
}

// sparkline draws series as an inline SVG polyline scaled to its own
// maximum, the latest sample at the right.
func sparkline(series []float64) template.HTML {
	const w, h = 120.0, 22.0
	if len(series) < 2 {
		return template.HTML(`<svg class="spark" width="120" height="22" viewBox="0 0 120 22" role="img" aria-label="no samples yet"></svg>`)
	}
	top := 0.0
	for _, v := range series {
		top = max(top, v)
	}
	var pts strings.Builder
	for i, v := range series {
		y := h - 1
		if top > 0 {
			y = h - 1 - v/top*(h-2)
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", float64(i)*w/float64(len(series)-1), y)
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" width="120" height="22" viewBox="0 0 120 22" role="img" aria-label="max %s"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="%s"/></svg>`,
		formatRate(top), strings.TrimSpace(pts.String())))
}

func formatRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk/s", v/1e3)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.1f/s", v)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func formatIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}
