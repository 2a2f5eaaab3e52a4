package benchreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// Geometry of the chart, in pixels.
const (
	svgWidth   = 980
	labelRight = 250 // right edge of the workload labels
	barLeft    = 260
	barWidth   = 480
	textLeft   = 752 // the ratio and rates, right of the bars
	rowHeight  = 30
	headHeight = 26 // a backend's heading row
	topMargin  = 78
	maxScale   = 4.0 // ratios beyond it are drawn clipped
)

// WriteSVG draws, per backend and workload, dlock's rate as a bar scaled
// to the baseline's (the grey bar, 1.0×; contended, the baseline's best
// way of waiting), labelled with the ratio and both rates. The SVG is
// plain text with no scripts or external fonts.
func WriteSVG(w io.Writer, cs []baseline.Comparison, title string) error {
	groups := byBackend(cs)
	scale := chartScale(cs)
	px := float64(barWidth) / scale
	height := topMargin + len(groups)*headHeight + len(cs)*rowHeight + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="16" y="26" font-size="17" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	legend(&b)
	axis(&b, px, scale, topMargin, topMargin+len(groups)*headHeight+len(cs)*rowHeight)
	y := topMargin
	for _, g := range groups {
		fmt.Fprintf(&b, `<text x="16" y="%d" font-weight="bold">%s</text>`+"\n", y+17, html.EscapeString(g[0].Backend))
		fmt.Fprintf(&b, `<line x1="16" y1="%d" x2="%d" y2="%d" stroke="#dddddd"/>`+"\n", y+headHeight-3, svgWidth-16, y+headHeight-3)
		y += headHeight
		for _, c := range g {
			bar(&b, c, y, px, scale)
			y += rowHeight
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// chartScale is the ratio at the bars' full width: the largest ratio
// (at least 1.25, at most maxScale) rounded up to a quarter.
func chartScale(cs []baseline.Comparison) float64 {
	m := 1.25
	for _, c := range cs {
		m = max(m, c.Ratio)
	}
	return math.Min(maxScale, math.Ceil(m*4)/4)
}

func legend(b *strings.Builder) {
	fmt.Fprintf(b, `<rect x="16" y="40" width="14" height="12" fill="#1f6feb"/><text x="36" y="51">dlock</text>`+"\n")
	fmt.Fprintf(b, `<rect x="90" y="40" width="14" height="12" fill="#d1242f"/><text x="110" y="51">dlock, under 0.8×</text>`+"\n")
	fmt.Fprintf(b, `<rect x="250" y="43" width="14" height="7" fill="#b0b0b0"/><text x="270" y="51">hand-written baseline, contended its best wait (= 1.0×)</text>`+"\n")
	fmt.Fprintf(b, `<text x="16" y="68" fill="#555555">ratio = dlock ops/s ÷ baseline ops/s, same process and run</text>`+"\n")
}

// bar draws one workload's row.
func bar(b *strings.Builder, c baseline.Comparison, y int, px, scale float64) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelRight, y+15, html.EscapeString(c.Workload))
	dw := math.Min(c.Ratio, scale) * px
	color := "#1f6feb"
	if c.Ratio < 0.8 {
		color = "#d1242f" // under 0.8×: most of the targets are at or above it
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="13" fill="%s"/>`+"\n", barLeft, y+3, dw, color)
	if c.Ratio > scale {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#ffffff" text-anchor="end">»</text>`+"\n", float64(barLeft)+dw-3, y+14)
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="7" fill="#b0b0b0"/>`+"\n", barLeft, y+18, px)
	fmt.Fprintf(b, `<text x="%d" y="%d"><tspan font-weight="bold">%.2f×</tspan> <tspan fill="#555555">%s vs %s ops/s</tspan></text>`+"\n",
		textLeft, y+15, c.Ratio, rate(c.Dlock.PerSec), rate(c.Baseline.PerSec))
}

// axis draws the 1.0× line and the scale's ticks.
func axis(b *strings.Builder, px, scale float64, top, bottom int) {
	for t := 0.0; t <= scale+1e-9; t += tickStep(scale) {
		x := float64(barLeft) + t*px
		stroke, dash := "#e5e5e5", ""
		if math.Abs(t-1) < 1e-9 {
			stroke, dash = "#444444", ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"%s/>`+"\n", x, top, x, bottom, stroke, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555555" font-size="11">%g×</text>`+"\n", x, bottom+14, t)
	}
}

func tickStep(scale float64) float64 {
	if scale > 2 {
		return 0.5
	}
	return 0.25
}

// rate formats ops/s compactly.
func rate(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}
