package benchreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// GrowthChartTitle is the title of docs/growth.svg.
const GrowthChartTitle = "Leases held on one Locker: refresh cost and client memory"

// Geometry of the growth chart, in pixels: two panels side by side.
const (
	growthWidth  = 980
	growthHeight = 430
	panelTop     = 96
	panelHeight  = 260
	panelWidth   = 360
	panelGap     = 120
	panelLeft    = 80 // the first panel's plot area; the second is panelWidth+panelGap right of it
)

// growthColors are the backends' lines, in order of first appearance.
var growthColors = []string{"#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bf8700", "#0a7b83", "#cf222e"}

// panel is one plot of the growth chart: y of a row, on a scale.
type panel struct {
	left  int
	title string
	y     func(baseline.LeaseReport) (float64, bool)
	scale yScale
}

// yScale maps a value to a height above the panel's bottom, 0 to
// panelHeight, and lists the ticks of its axis.
type yScale interface {
	pos(v float64) float64
	ticks() []float64
	label(v float64) string
}

// WriteGrowthSVG draws g as two panels over the number of leases held
// (log scale): the refresh round trips per watchdog tick (log scale) and
// the client's heap per lease (with the 2 KiB target dashed), one line
// per backend. A failed run is a ✗ at the top of its column. The SVG is
// plain text with no scripts or external fonts.
func WriteGrowthSVG(w io.Writer, g *Growth) error {
	groups := growthGroups(g)
	xs := newLogX(g.Rows)
	rt := func(r baseline.LeaseReport) (float64, bool) {
		if r.Error != "" || r.RoundTripsPerTick == nil {
			return 0, false
		}
		return *r.RoundTripsPerTick, true
	}
	mem := func(r baseline.LeaseReport) (float64, bool) { return r.HeapBytesPerLease, r.Error == "" }
	panels := []panel{
		{left: panelLeft, title: "refresh round trips per watchdog tick (log scale)", y: rt, scale: newLogY(g.Rows, rt)},
		{left: panelLeft + panelWidth + panelGap, title: "client memory per lease (Go heap)", y: mem, scale: newLinearBytes(g.Rows, mem)},
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		growthWidth, growthHeight, growthWidth, growthHeight)
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="16" y="26" font-size="17" font-weight="bold">%s</text>`+"\n", html.EscapeString(GrowthChartTitle))
	growthLegend(&b, groups)
	for _, p := range panels {
		p.frame(&b, xs)
		for i, grp := range groups {
			p.line(&b, xs, grp, growthColors[i%len(growthColors)])
		}
	}
	target := panels[1]
	y := float64(panelTop+panelHeight) - target.scale.pos(MaxHeapPerLease)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444444" stroke-dasharray="5 4"/>`+"\n",
		target.left, y, target.left+panelWidth, y)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444444" font-size="11">target ≤ 2 KiB</text>`+"\n", target.left+panelWidth-4, y-5)
	fmt.Fprintf(&b, `<text x="16" y="%d" fill="#555555">measured %s; a tick is the watchdog's period, TTL/3; a hollow point: leases were lost in that run; ✗: the run failed</text>`+"\n",
		growthHeight-12, html.EscapeString(g.Measured))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// growthLegend names each backend's color.
func growthLegend(b *strings.Builder, groups [][]baseline.LeaseReport) {
	x := 16
	for i, grp := range groups {
		name := grp[0].Backend
		fmt.Fprintf(b, `<rect x="%d" y="42" width="14" height="4" fill="%s"/><text x="%d" y="49">%s</text>`+"\n",
			x, growthColors[i%len(growthColors)], x+20, html.EscapeString(name))
		x += 20 + 8*len(name) + 24
	}
}

// frame draws the panel's title, axes, grid and tick labels.
func (p panel) frame(b *strings.Builder, xs logX) {
	bottom := panelTop + panelHeight
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", p.left, panelTop-14, html.EscapeString(p.title))
	for _, v := range p.scale.ticks() {
		y := float64(bottom) - p.scale.pos(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", p.left, y, p.left+panelWidth, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555555" font-size="11">%s</text>`+"\n", p.left-6, y+4, p.scale.label(v))
	}
	for _, n := range xs.ticks {
		x := p.left + int(math.Round(xs.pos(n)))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#e5e5e5"/>`+"\n", x, panelTop, x, bottom)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#555555" font-size="11">%s</text>`+"\n", x, bottom+16, leasesLabel(n))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444444"/>`+"\n", p.left, panelTop, panelWidth, panelHeight)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#555555">leases held (log scale)</text>`+"\n", p.left+panelWidth/2, bottom+34)
}

// line draws one backend's points, joined, and a ✗ for each failed run.
func (p panel) line(b *strings.Builder, xs logX, rows []baseline.LeaseReport, color string) {
	var pts []string
	for _, r := range rows {
		x := float64(p.left) + xs.pos(float64(r.Leases))
		v, ok := p.y(r)
		if !ok {
			if r.Error != "" {
				fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s" font-weight="bold"><title>%s: %s</title>✗</text>`+"\n",
					x, panelTop+16, color, html.EscapeString(r.Backend), html.EscapeString(r.Error))
			}
			continue
		}
		y := float64(panelTop+panelHeight) - p.scale.pos(v)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		fill, lost := color, ""
		if r.Lost > 0 {
			fill, lost = "#ffffff", fmt.Sprintf(", %d lost", r.Lost)
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="2"><title>%s, %d leases: %s%s</title></circle>`+"\n",
			x, y, fill, color, html.EscapeString(r.Backend), r.Leases, p.scale.label(v), lost)
	}
	if len(pts) > 1 {
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
	}
}

// leasesLabel writes 1000 as 1k and 100000 as 100k.
func leasesLabel(n float64) string {
	if n >= 1000 {
		return fmt.Sprintf("%gk", n/1000)
	}
	return fmt.Sprintf("%g", n)
}

// logX places a number of leases on the panels' log-scale x axis.
type logX struct {
	lo, hi float64 // decades
	ticks  []float64
}

func newLogX(rows []baseline.LeaseReport) logX {
	ns := make([]float64, 0, len(GrowthLeases)+len(rows))
	for _, n := range GrowthLeases {
		ns = append(ns, float64(n))
	}
	for _, r := range rows {
		ns = append(ns, float64(max(r.Leases, 1)))
	}
	lo, hi := decades(ns)
	x := logX{lo: lo, hi: hi}
	for d := lo; d <= hi; d++ {
		x.ticks = append(x.ticks, math.Pow(10, d))
	}
	return x
}

// pos is n's distance from the plot's left edge, with a margin each side.
func (x logX) pos(n float64) float64 {
	const margin = 24
	return margin + (math.Log10(n)-x.lo)/(x.hi-x.lo)*(panelWidth-2*margin)
}

// decades are the whole powers of ten around vs (each at least 0.1),
// at least one decade apart. A value within 1% of a power of ten counts
// as on it: 0.9999 round trips per tick (a hold a hair longer than three
// ticks) does not open a decade of its own.
func decades(vs []float64) (lo, hi float64) {
	const slack = 0.005 // decades: about 1%
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		l := math.Log10(math.Max(v, 0.1))
		lo, hi = math.Min(lo, math.Floor(l+slack)), math.Max(hi, math.Ceil(l-slack))
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// logY is a log scale of whole decades.
type logY struct{ lo, hi float64 }

func newLogY(rows []baseline.LeaseReport, y func(baseline.LeaseReport) (float64, bool)) logY {
	var vs []float64
	for _, r := range rows {
		if v, ok := y(r); ok {
			vs = append(vs, v)
		}
	}
	lo, hi := decades(vs)
	return logY{lo: lo, hi: hi}
}

func (s logY) pos(v float64) float64 {
	return (math.Log10(math.Max(v, 0.1)) - s.lo) / (s.hi - s.lo) * panelHeight
}

func (s logY) ticks() []float64 {
	var ts []float64
	for d := s.lo; d <= s.hi; d++ {
		ts = append(ts, math.Pow(10, d))
	}
	return ts
}

func (s logY) label(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}

// linearBytes is a scale from 0 bytes to a multiple of its step, with
// room above the 2 KiB target.
type linearBytes struct{ step, top float64 }

func newLinearBytes(rows []baseline.LeaseReport, y func(baseline.LeaseReport) (float64, bool)) linearBytes {
	m := MaxHeapPerLease * 1.25
	for _, r := range rows {
		if v, ok := y(r); ok {
			m = math.Max(m, v*1.05)
		}
	}
	step := 512.0
	for m/step > 8 {
		step *= 2
	}
	return linearBytes{step: step, top: math.Ceil(m/step) * step}
}

func (s linearBytes) pos(v float64) float64 { return math.Max(v, 0) / s.top * panelHeight }

func (s linearBytes) ticks() []float64 {
	var ts []float64
	for v := 0.0; v <= s.top+1e-9; v += s.step {
		ts = append(ts, v)
	}
	return ts
}

func (s linearBytes) label(v float64) string {
	if v == 0 {
		return "0"
	}
	return bytesSize(v)
}
