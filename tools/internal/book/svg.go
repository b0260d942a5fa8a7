package book

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file draws a chartData as SVG: a categorical x axis, a linear or
// logarithmic y axis labelled in human units, lines with markers or grouped
// bars, a legend, and a <title> and <desc> for screen readers. Every number
// is written with one decimal, so the same data always draws the same bytes,
// and the output is well-formed XML.

const (
	chartWidth    = 720.0
	chartPlotH    = 250.0
	chartFontSize = 12.0
	charWidth     = 6.8 // average advance of a 12 px sans-serif character, for layout
	maxLabelChars = 36  // longer category labels are cut, the whole one kept in a <title>
)

// Okabe–Ito colours: distinguishable with the common colour-vision
// deficiencies; every series also gets its own marker shape.
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

// renderSVG draws data as a standalone, well-formed SVG element.
func renderSVG(data *chartData) string {
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
	plotW := chartWidth - left - right

	// Legend rows under the title.
	top := 34.0
	type legendItem struct{ x, y float64 }
	var legend []legendItem
	if len(data.Series) > 1 {
		x, y := left, top+6
		for _, s := range data.Series {
			w := 30 + float64(len([]rune(s.Name)))*charWidth + 18
			if x+w > chartWidth-right && x > left {
				x, y = left, y+18
			}
			legend = append(legend, legendItem{x, y})
			x += w
		}
		top = y + 18
	}
	plotTop := top + 10
	ys.top, ys.h = plotTop, chartPlotH

	// Categories: rotate their labels by 35° when they do not fit their
	// slot, and then make room below the plot and, for the first label,
	// to the left of it.
	labels := make([]string, len(data.X))
	maxX := 0
	for i, x := range data.X {
		labels[i] = truncateLabel(x, maxLabelChars)
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
			plotW = chartWidth - left - right
			slot = plotW / n
		}
	}
	height := math.Ceil(plotTop + chartPlotH + bottom)
	plotBottom := plotTop + chartPlotH
	xAt := func(i int) float64 { return left + slot*(float64(i)+0.5) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 %s %s" width="%s" height="%s" role="img" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="%s">`+"\n",
		f1(chartWidth), f1(height), f1(chartWidth), f1(height), f1(chartFontSize))
	fmt.Fprintf(&b, "<title>%s</title>\n", escapeHTML(data.Title))
	fmt.Fprintf(&b, "<desc>%s</desc>\n", escapeHTML(chartDescription(data)))
	fmt.Fprintf(&b, `<text class="chart-title" x="%s" y="20" font-size="14" font-weight="600" fill="#222">%s</text>`+"\n", f1(left), escapeHTML(data.Title))

	// Grid and y ticks.
	b.WriteString(`<g class="y-axis" fill="#555" text-anchor="end">` + "\n")
	for _, t := range ticks {
		y := ys.y(t)
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e3e3e3"/>`+"\n", f1(left), f1(left+plotW), f1(y), f1(y))
		label := formatTick(t, data.Unit)
		if t == 0 {
			label = "0"
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s">%s</text>`+"\n", f1(left-6), f1(y+4), escapeHTML(label))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(14 %s) rotate(-90)" text-anchor="middle" fill="#333">%s</text>`+"\n",
		f1(plotTop+chartPlotH/2), escapeHTML(data.YLabel))

	// Axes and x labels.
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`+"\n", f1(left), f1(left+plotW), f1(plotBottom), f1(plotBottom))
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`+"\n", f1(left), f1(left), f1(plotTop), f1(plotBottom))
	b.WriteString(`<g class="x-axis" fill="#555">` + "\n")
	for i, x := range labels {
		full := ""
		if x != data.X[i] {
			full = "<title>" + escapeHTML(data.X[i]) + "</title>"
		}
		if rotate {
			fmt.Fprintf(&b, `<text transform="translate(%s %s) rotate(-35)" text-anchor="end">%s%s</text>`+"\n", f1(xAt(i)+4), f1(plotBottom+14), full, escapeHTML(x))
		} else {
			fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s%s</text>`+"\n", f1(xAt(i)), f1(plotBottom+18), full, escapeHTML(x))
		}
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="axis-label" x="%s" y="%s" text-anchor="middle" fill="#333">%s</text>`+"\n",
		f1(left+plotW/2), f1(height-6), escapeHTML(data.XLabel))

	// Series.
	nSeries := float64(len(data.Series))
	barW := math.Min(slot*0.8/nSeries, 48)
	labelBars := data.Bars && len(data.Series)*len(data.X) <= 16
	for si, s := range data.Series {
		color := seriesColors[si%len(seriesColors)]
		fmt.Fprintf(&b, `<g class="series" fill="%s" stroke="%s">`+"\n", color, color)
		if data.Bars {
			for i, v := range s.Values {
				if !s.Has[i] {
					continue
				}
				x := xAt(i) - barW*nSeries/2 + barW*float64(si)
				y := ys.y(v)
				fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" stroke="none"><title>%s</title></rect>`+"\n",
					f1(x+1), f1(y), f1(barW-2), f1(math.Max(plotBottom-y, 0.5)), escapeHTML(pointTitle(data, s, i)))
				if labelBars {
					fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" font-size="10" stroke="none" fill="#333">%s</text>`+"\n",
						f1(x+barW/2), f1(y-4), escapeHTML(formatTick(v, data.Unit)))
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
				run = append(run, f1(xAt(i))+","+f1(ys.y(v)))
			}
			flush()
			for i, v := range s.Values {
				if s.Has[i] {
					b.WriteString(marker(si, xAt(i), ys.y(v), pointTitle(data, s, i)))
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
		l := legend[si]
		fmt.Fprintf(&b, `<g class="legend" fill="%s" stroke="%s">`, color, color)
		if data.Bars {
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="20" height="10" stroke="none"/>`, f1(l.x), f1(l.y-9))
		} else {
			fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke-width="2"/>`, f1(l.x), f1(l.x+22), f1(l.y-4), f1(l.y-4))
			b.WriteString(strings.TrimSuffix(marker(si, l.x+11, l.y-4, ""), "\n"))
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" stroke="none" fill="#222">%s</text></g>`+"\n", f1(l.x+28), f1(l.y), escapeHTML(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
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
		fill = ` fill="#fff" stroke-width="1.5"`
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
	return fmt.Sprintf("%s, %s=%s: %s", s.Name, data.XLabel, data.X[i], FormatValue(s.Values[i], data.Unit))
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
