package book

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"softgpu/tools/internal/wrap"
)

// This file draws a chartData as SVG: a categorical x axis, a linear or
// logarithmic y axis labelled in human units, lines with markers or grouped
// bars, whiskers from the lowest to the highest pass, marks the chapter asked
// for, a legend, and a <title> and <desc> for screen readers. Every number
// is written with one decimal, so the same data always draws the same bytes,
// and the output is well-formed XML.
//
// A chart is drawn twice, at two widths (chartLayouts): the page shows the
// wide one when its column is wide enough to draw it at nearly full size and
// the narrow one otherwise (a CSS container query), so that no text is drawn
// smaller than minChartText CSS pixels. Colours are presentation attributes,
// so a chart opened alone still reads; the book's stylesheet overrides them
// through the class names for dark mode.

const (
	chartFontSize = 12.0
	charWidth     = 6.8 // average advance of a 12 px sans-serif character, for layout
	titleSize     = 14.0
	minChartText  = 11.0 // CSS px: the smallest text a reader should have to read
)

// chartLayout is one width a chart is drawn at.
type chartLayout struct {
	Class     string  // chart-wide or chart-narrow
	Width     float64 // viewBox width, in CSS px at full size
	PlotH     float64
	MaxLabel  int     // longer category labels are cut, the whole one kept in a <title>
	MinScale  float64 // the smallest scale the page draws it at; see style.css
	TitleLeft bool    // the title starts at the left edge rather than the plot's
}

// chartLayouts are the widths every chart is drawn at. The stylesheet's
// container query shows chart-wide in a column of at least
// wideChartMinColumn px, so its text is drawn at ≥ 12 × 700/720 ≈ 11.7 px;
// chart-narrow is drawn for phones, a 390 px screen's 355 px column.
var chartLayouts = []chartLayout{
	{Class: "chart-wide", Width: 720, PlotH: 250, MaxLabel: 36, MinScale: wideChartMinColumn / 720},
	{Class: "chart-narrow", Width: 360, PlotH: 220, MaxLabel: 22, MinScale: 355.0 / 360, TitleLeft: true},
}

// wideChartMinColumn is the column width, in CSS px, from which the page
// shows the wide chart (style.css's @container rule says the same).
const wideChartMinColumn = 700.0

// Okabe–Ito colours: distinguishable with the common colour-vision
// deficiencies; every series also gets its own marker shape. The last,
// black, is drawn in the text colour by the stylesheet (white in dark mode).
var seriesColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

// yScale maps values to the plot's vertical axis.
type yScale struct {
	lo, hi float64
	log    bool
	top, h float64
}

func (s yScale) y(v float64) float64 {
	var f float64
	if s.log {
		f = (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	} else {
		f = (v - s.lo) / (s.hi - s.lo)
	}
	return s.top + s.h*(1-f)
}

// fit sets the scale to cover minV..maxV and returns its tick values:
// decades on a log axis (with 2 and 5 between when there are few), and
// 1, 2 or 5 × 10^k steps from zero on a linear one.
func (s *yScale) fit(minV, maxV float64) []float64 {
	if s.log {
		s.lo = math.Pow(10, math.Floor(math.Log10(minV)))
		s.hi = math.Pow(10, math.Ceil(math.Log10(maxV)))
		if s.hi <= s.lo {
			s.hi = s.lo * 10
		}
		decades := int(math.Round(math.Log10(s.hi / s.lo)))
		var ticks []float64
		for i := 0; i <= decades; i++ {
			base := s.lo * math.Pow(10, float64(i))
			ticks = append(ticks, base)
			if decades <= 2 && i < decades {
				ticks = append(ticks, base*2, base*5)
			}
		}
		return ticks
	}
	s.lo = math.Min(0, minV)
	if maxV <= s.lo {
		maxV = s.lo + 1
	}
	step := niceStep((maxV - s.lo) / 5)
	s.hi = math.Ceil(maxV/step) * step
	var ticks []float64
	for v := s.lo; v <= s.hi+step/2; v += step {
		ticks = append(ticks, roundSig(v, 6))
	}
	return ticks
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// renderCharts draws data once per layout.
func renderCharts(data *chartData) string {
	var b strings.Builder
	for _, l := range chartLayouts {
		b.WriteString(renderSVG(data, l))
	}
	return b.String()
}

// renderSVG draws data at one layout as a standalone, well-formed SVG element.
func renderSVG(data *chartData, l chartLayout) string {
	minV, maxV := data.valueRange()
	ys := yScale{log: data.Log}
	ticks := ys.fit(minV, maxV)

	// Horizontal layout: the widest tick label sets the left margin.
	maxTick := 0
	for _, t := range ticks {
		maxTick = max(maxTick, len([]rune(formatTick(t, data.Unit))))
	}
	left := 34 + float64(maxTick)*charWidth
	right := 16.0
	plotW := l.Width - left - right

	// The title, wrapped to the width; legend rows under it.
	titleX := left
	if l.TitleLeft {
		titleX = 8
	}
	titleLines := wrap.Words(strings.Fields(data.Title), int((l.Width-titleX-right)/(charWidth*titleSize/chartFontSize)))
	top := 16 + 18*float64(len(titleLines))
	type legendItem struct{ x, y float64 }
	var legend []legendItem
	if len(data.Series) > 1 {
		x, y := titleX, top+6
		for _, s := range data.Series {
			w := 30 + float64(len([]rune(s.Name)))*charWidth + 18
			if x+w > l.Width-right && x > titleX {
				x, y = titleX, y+18
			}
			legend = append(legend, legendItem{x, y})
			x += w
		}
		top = y + 18
	}
	plotTop := top + 10
	ys.top, ys.h = plotTop, l.PlotH

	// Categories: rotate their labels by 35° when they do not fit their
	// slot, and then make room below the plot and, for the first label,
	// to the left of it.
	labels := make([]string, len(data.X))
	maxX := 0
	for i, x := range data.X {
		labels[i] = truncateLabel(x, l.MaxLabel)
		maxX = max(maxX, len([]rune(labels[i])))
	}
	n := float64(len(data.X))
	slot := plotW / n
	rotate := float64(maxX)*charWidth > slot-6
	bottom := 44.0
	if rotate {
		const cos35, sin35 = 0.819, 0.574
		bottom = 34 + float64(maxX)*charWidth*sin35
		firstW := float64(len([]rune(labels[0]))) * charWidth * cos35
		if need := firstW + 6 - slot/2; need > left {
			left = need
			plotW = l.Width - left - right
			slot = plotW / n
		}
	}
	height := math.Ceil(plotTop + l.PlotH + bottom)
	plotBottom := plotTop + l.PlotH
	xAt := func(pos float64) float64 { return left + slot*(pos+0.5) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart %s" viewBox="0 0 %s %s" width="%s" height="%s" role="img" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="%s">`+"\n",
		l.Class, f1(l.Width), f1(height), f1(l.Width), f1(height), f1(chartFontSize))
	fmt.Fprintf(&b, "<title>%s</title>\n", escapeHTML(data.Title))
	fmt.Fprintf(&b, "<desc>%s</desc>\n", escapeHTML(chartDescription(data)))
	for i, line := range titleLines {
		fmt.Fprintf(&b, `<text class="chart-title" x="%s" y="%s" font-size="%s" font-weight="600" fill="#222">%s</text>`+"\n", f1(titleX), f1(20+18*float64(i)), f1(titleSize), escapeHTML(line))
	}

	// Grid and y ticks.
	b.WriteString(`<g class="y-axis" fill="#555" text-anchor="end">` + "\n")
	for _, t := range ticks {
		y := ys.y(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e3e3e3"/>`+"\n", f1(left), f1(left+plotW), f1(y), f1(y))
		label := formatTick(t, data.Unit)
		if t == 0 {
			label = "0"
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s">%s</text>`+"\n", f1(left-6), f1(y+4), escapeHTML(label))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(14 %s) rotate(-90)" text-anchor="middle" fill="#333">%s</text>`+"\n",
		f1(plotTop+l.PlotH/2), escapeHTML(data.YLabel))

	// Axes and x labels.
	fmt.Fprintf(&b, `<line class="axis" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`+"\n", f1(left), f1(left+plotW), f1(plotBottom), f1(plotBottom))
	fmt.Fprintf(&b, `<line class="axis" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`+"\n", f1(left), f1(left), f1(plotTop), f1(plotBottom))
	b.WriteString(`<g class="x-axis" fill="#555">` + "\n")
	for i, x := range labels {
		full := ""
		if x != data.X[i] {
			full = "<title>" + escapeHTML(data.X[i]) + "</title>"
		}
		if rotate {
			fmt.Fprintf(&b, `<text transform="translate(%s %s) rotate(-35)" text-anchor="end">%s%s</text>`+"\n", f1(xAt(float64(i))+4), f1(plotBottom+14), full, escapeHTML(x))
		} else {
			fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s%s</text>`+"\n", f1(xAt(float64(i))), f1(plotBottom+18), full, escapeHTML(x))
		}
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="axis-label" x="%s" y="%s" text-anchor="middle" fill="#333">%s</text>`+"\n",
		f1(left+plotW/2), f1(height-6), escapeHTML(data.XLabel))

	// Marks: dashed verticals where the chapter points, labels staggered
	// so that neighbours do not overwrite each other.
	for i, m := range data.Marks {
		x := xAt(m.Pos)
		fmt.Fprintf(&b, `<g class="mark"><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#777" stroke-dasharray="4 3"/>`, f1(x), f1(x), f1(plotTop), f1(plotBottom))
		anchor, dx := "start", 3.0
		if x+3+float64(len([]rune(m.Label)))*charWidth > left+plotW {
			anchor, dx = "end", -3
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="%s" fill="#444">%s</text></g>`+"\n", f1(x+dx), f1(plotTop+12+14*float64(i%2)), anchor, escapeHTML(m.Label))
	}

	// Series.
	nSeries := float64(len(data.Series))
	barW := math.Min(slot*0.8/nSeries, 48)
	// Bars carry their value when every label fits over its bar.
	labelBars := data.Bars && len(data.Series)*len(data.X) <= 16
	room := barW + 4
	if len(data.Series) == 1 {
		room = slot * 0.9
	}
	for _, s := range data.Series {
		for i, v := range s.Values {
			if s.Has[i] && float64(len([]rune(formatTick(v, data.Unit))))*charWidth > room {
				labelBars = false
			}
		}
	}
	for si, s := range data.Series {
		color := seriesColors[si%len(seriesColors)]
		fmt.Fprintf(&b, `<g class="series s%d" fill="%s" stroke="%s">`+"\n", si%len(seriesColors), color, color)
		if data.Bars {
			for i, v := range s.Values {
				if !s.Has[i] {
					continue
				}
				x := xAt(float64(i)) - barW*nSeries/2 + barW*float64(si)
				y := ys.y(v)
				fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" stroke="none"><title>%s</title></rect>`+"\n",
					f1(x+1), f1(y), f1(barW-2), f1(math.Max(plotBottom-y, 0.5)), escapeHTML(pointTitle(data, s, i)))
				labelY := y
				if s.hasRange(i) {
					b.WriteString(whisker(x+barW/2, ys.y(s.Lo[i]), ys.y(s.Hi[i]), "whisker on-bar"))
					labelY = math.Min(labelY, ys.y(s.Hi[i]))
				}
				if labelBars {
					fmt.Fprintf(&b, `<text class="bar-label" x="%s" y="%s" text-anchor="middle" stroke="none" fill="#333">%s</text>`+"\n",
						f1(x+barW/2), f1(labelY-5), escapeHTML(formatTick(v, data.Unit)))
				}
			}
		} else {
			// Lines join neighbouring points; a missing point breaks the line.
			var run []string
			flush := func() {
				if len(run) > 1 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke-width="2" points="%s"/>`+"\n", strings.Join(run, " "))
				}
				run = run[:0]
			}
			for i, v := range s.Values {
				if !s.Has[i] {
					flush()
					continue
				}
				run = append(run, f1(xAt(float64(i)))+","+f1(ys.y(v)))
			}
			flush()
			for i, v := range s.Values {
				if s.Has[i] && s.hasRange(i) {
					b.WriteString(whisker(xAt(float64(i)), ys.y(s.Lo[i]), ys.y(s.Hi[i]), "whisker"))
				}
				if s.Has[i] {
					b.WriteString(marker(si, xAt(float64(i)), ys.y(v), pointTitle(data, s, i)))
				}
			}
		}
		b.WriteString("</g>\n")
	}

	// Legend.
	for si, s := range data.Series {
		if len(legend) == 0 {
			break
		}
		color := seriesColors[si%len(seriesColors)]
		lg := legend[si]
		fmt.Fprintf(&b, `<g class="legend s%d" fill="%s" stroke="%s">`, si%len(seriesColors), color, color)
		if data.Bars {
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="20" height="10" stroke="none"/>`, f1(lg.x), f1(lg.y-9))
		} else {
			fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke-width="2"/>`, f1(lg.x), f1(lg.x+22), f1(lg.y-4), f1(lg.y-4))
			b.WriteString(strings.TrimSuffix(marker(si, lg.x+11, lg.y-4, ""), "\n"))
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" stroke="none" fill="#222">%s</text></g>`+"\n", f1(lg.x+28), f1(lg.y), escapeHTML(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// whisker draws the range of one point's passes, lo to hi, with caps.
func whisker(x, yLo, yHi float64, class string) string {
	if math.Abs(yLo-yHi) < 1 {
		return "" // a range under a pixel would only smudge the marker
	}
	return fmt.Sprintf(`<path class="%s" fill="none" stroke-width="1.5" d="M%s %sV%sM%s %sH%sM%s %sH%s"/>`+"\n",
		class, f1(x), f1(yLo), f1(yHi), f1(x-4), f1(yLo), f1(x+4), f1(x-4), f1(yHi), f1(x+4))
}

// truncateLabel cuts s to at most n characters, ending in "…".
func truncateLabel(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// marker draws series si's point shape at (x, y), with a hover title.
func marker(si int, x, y float64, title string) string {
	t := ""
	if title != "" {
		t = "<title>" + escapeHTML(title) + "</title>"
	}
	fill := ""
	if si >= 4 { // later series: hollow shapes
		fill = ` class="hollow" fill="#fff" stroke-width="1.5"`
	}
	switch si % 4 {
	case 1:
		return fmt.Sprintf(`<rect x="%s" y="%s" width="8" height="8"%s>%s</rect>`+"\n", f1(x-4), f1(y-4), fill, t)
	case 2:
		return fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s"%s>%s</polygon>`+"\n", f1(x), f1(y-5), f1(x+5), f1(y+4), f1(x-5), f1(y+4), fill, t)
	case 3:
		return fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s %s,%s"%s>%s</polygon>`+"\n", f1(x), f1(y-5), f1(x+5), f1(y), f1(x), f1(y+5), f1(x-5), f1(y), fill, t)
	}
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="4"%s>%s</circle>`+"\n", f1(x), f1(y), fill, t)
}

func pointTitle(data *chartData, s chartSeries, i int) string {
	t := fmt.Sprintf("%s, %s=%s: %s", s.Name, data.XLabel, data.X[i], FormatValue(s.Values[i], data.Unit))
	if s.hasRange(i) {
		t += fmt.Sprintf(" (%s; passes %s … %s)", data.Stat, FormatValue(s.Lo[i], data.Unit), FormatValue(s.Hi[i], data.Unit))
	}
	return t
}

// chartDescription is the chart's data as text, for screen readers.
func chartDescription(data *chartData) string {
	var parts []string
	for _, s := range data.Series {
		var pts []string
		for i, v := range s.Values {
			if s.Has[i] {
				pts = append(pts, data.X[i]+" "+FormatValue(v, data.Unit))
			}
		}
		parts = append(parts, s.Name+": "+strings.Join(pts, ", "))
	}
	return data.YLabel + " by " + data.XLabel + ". " + strings.Join(parts, "; ") + "."
}
