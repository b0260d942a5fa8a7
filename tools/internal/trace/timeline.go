package trace

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"softgpu/tools/internal/wrap"
)

// This file draws a trace as a timeline for the book: a self-contained SVG
// with one lane per track (engines, then channels, then the driver, as
// Tracks are ordered; a channel with no event anywhere in the trace gets
// no lane, since from stage 6 a trace names all 128 channels), slices as
// rectangles coloured by category (commands by status, a preempted slice
// and a sleep pale and outlined), instants as ticks, a time axis, a legend
// and the caller's title and caption.
//
// Sizes are for a phone: the viewBox is 624 units wide and text is 18
// units, so text is 11.25 px when the figure is drawn 390 px wide (and
// larger anywhere wider). Colours are CSS classes in the SVG's own <style>, with a
// prefers-color-scheme: dark variant and a background of their own, so the
// figure reads the same on a light or dark page. Class names start with
// "sgt-" and the SVG has no id attributes, so several timelines can sit
// inline in one HTML page.
//
// Determinism: the output is a pure function of the trace and the options.
// Lanes come from Tracks (a sorted slice), events in file order, the legend
// and the stylesheet from fixed tables; numbers are written with at most
// two decimals.
//
// Thousands of events stay small: consecutive slices of one class on one
// lane that would each be drawn narrower than half a unit, with less than
// half a unit between them, are drawn as one rectangle whose opacity is the
// fraction of it they fill and whose <title> counts them; instants of one
// class less than a unit from the one before become one tick, or a pale band
// when the run spreads wider than a unit.

// Layout, in SVG user units.
const (
	svgWidth     = 624.0
	svgPad       = 12.0
	fontSize     = 18.0 // 11.25 px when the figure is drawn 390 px wide
	titleSize    = 20.0
	lineHeight   = 24.0
	charAdvance  = 11.5 // a generous average advance of an 18-unit sans-serif character (0.64 em), for layout
	titleAdvance = 12.5 // the same for the 20-unit bold title
	legendRow    = 26.0
	laneLabel    = 22.0 // a lane's name sits on its own line above its bar
	laneBar      = 26.0
	laneGap      = 12.0
	minWidth     = 0.5 // the narrowest slice drawn; narrower ones merge (see above)
	tickMerge    = 1.0 // instants closer than this merge into one tick, or a band
	maxTicks     = 5   // axis intervals at most: ≥ 123 units apart, for labels ~8 characters (80 units) wide
)

// TimelineOptions says what RenderSVG draws.
type TimelineOptions struct {
	Title   string // drawn at the top; also the SVG's accessible name
	Caption string // drawn under the axis: say which trace and command made the figure

	// The window, in microseconds of device time. Zero From is the first
	// event's start; zero To is the latest end of any event. First, when
	// above zero, sets the window to the First µs after the first event's
	// start instead, and From and To must be zero.
	From, To float64
	First    float64
}

// ErrWindow is what RenderSVG's errors about the window wrap.
var ErrWindow = errors.New("bad timeline window")

// MaxWindowMicros bounds From, To and First: 10¹² µs, about 11½ days of
// device time, far beyond any trace, and far enough inside time.Duration's
// 2⁶³ ns (about 292 years) that the window's ends and length cannot
// overflow (they would wrap negative, and the axis would have no ticks).
const MaxWindowMicros = 1e12

// CheckWindowMicros returns an error unless us is finite and at most
// MaxWindowMicros; name names the value in the message.
func CheckWindowMicros(name string, us float64) error {
	if math.IsNaN(us) || math.IsInf(us, 0) || us > MaxWindowMicros {
		return fmt.Errorf("%s %v: want a finite number of µs, at most %g", name, us, float64(MaxWindowMicros))
	}
	return nil
}

// paint is one class of drawn event: its legend label and colours.
type paint struct {
	class, label string
	light, dark  string // fill of a slice, stroke of a tick
	// outline of a slice, light and dark; "" for none
	lightOutline, darkOutline string
}

// paints is every class, in legend order. Colours are Okabe–Ito where
// they reach (distinguishable with the common colour-vision deficiencies),
// lightened for the dark variant.
var paints = []paint{
	{class: "sgt-ok", label: "command", light: "#0072b2", dark: "#4aa3df"},
	{class: "sgt-preempted", label: "command preempted", light: "#a6cee3", dark: "#1f4e6e", lightOutline: "#0072b2", darkOutline: "#4aa3df"},
	{class: "sgt-err", label: "command failed", light: "#d55e00", dark: "#ff8a4c"},
	{class: "sgt-sleep", label: "asleep", light: "#dfe6ee", dark: "#2f3b48", lightOutline: "#7d8fa3", darkOutline: "#8a9db2"},
	{class: "sgt-sched", label: "scheduling", light: "#cc79a7", dark: "#e59cc4"},
	{class: "sgt-fault", label: "fault handling", light: "#e69f00", dark: "#f5b841"},
	{class: "sgt-tlb", label: "TLB", light: "#999933", dark: "#c4c45a"},
	{class: "sgt-client", label: "client", light: "#56b4e9", dark: "#7fcbf5"},
	{class: "sgt-doorbell", label: "doorbell", light: "#009e73", dark: "#35c99b"},
	{class: "sgt-irq", label: "interrupt", light: "#882255", dark: "#d9709f"},
	{class: "sgt-other", label: "other", light: "#7f7f7f", dark: "#a6a6a6"},
}

// The page colours, light then dark.
var pageColours = [][3]string{
	{"sgt-bg", "fill:#ffffff", "fill:#16181c"},
	{"sgt-band", "fill:#f3f5f8", "fill:#1f2329"},
	{"sgt-grid", "stroke:#dde1e6", "stroke:#30353d"},
	{"sgt-axis", "stroke:#5f6670", "stroke:#a0a7b0"},
	{"sgt-muted", "fill:#5f6670", "fill:#a0a7b0"},
	{"sgt-nested", "stroke:#ffffff", "stroke:#16181c"}, // the background's colour
}

// classOf picks the paint class of an event.
func classOf(e *Event) string {
	switch e.Category {
	case CategoryCommand:
		switch e.Status() {
		case "ok":
			return "sgt-ok"
		case "preempted": // a slice of a command that stopped at a chunk boundary and runs again later (stage 6 on)
			return "sgt-preempted"
		}
		return "sgt-err"
	case CategoryIdle:
		return "sgt-sleep"
	case CategorySched:
		return "sgt-sched"
	case CategoryFault:
		return "sgt-fault"
	case CategoryTLB:
		return "sgt-tlb"
	case CategoryClient:
		return "sgt-client"
	case CategoryDoorbell:
		return "sgt-doorbell"
	case CategoryIRQ:
		return "sgt-irq"
	}
	return "sgt-other"
}

// EventsShown counts the events of t that the options' window shows: those
// that start or end in it, or span it. A window may show none (one after
// the trace's end, or a trace with no events) and RenderSVG draws it, empty;
// whoever puts a caption under the figure may want to refuse that.
func (o TimelineOptions) EventsShown(t *Trace) (int, error) {
	from, to, err := o.window(t)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range t.Events {
		if e := &t.Events[i]; e.Start <= to && e.End() >= from {
			n++
		}
	}
	return n, nil
}

// window resolves the options' window against the trace.
func (o TimelineOptions) window(t *Trace) (from, to time.Duration, err error) {
	for _, v := range []struct {
		name string
		us   float64
	}{{"From", o.From}, {"To", o.To}, {"First", o.First}} {
		if err := CheckWindowMicros(v.name, v.us); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", ErrWindow, err)
		}
	}
	if o.From < 0 || o.To < 0 || o.First < 0 {
		return 0, 0, fmt.Errorf("%w: From %v, To %v, First %v: want none negative", ErrWindow, o.From, o.To, o.First)
	}
	if o.First > 0 && (o.From != 0 || o.To != 0) {
		return 0, 0, fmt.Errorf("%w: First %v µs with From or To: give one or the other", ErrWindow, o.First)
	}
	first, last := t.Span()
	if len(t.Events) == 0 && (o.From == 0 || o.To == 0) {
		return 0, 0, fmt.Errorf("%w: the trace has no events; give both From and To", ErrWindow)
	}
	micro := func(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }
	switch {
	case o.First > 0:
		from, to = first, first+micro(o.First)
	default:
		from, to = first, last
		if o.From > 0 {
			from = micro(o.From)
		}
		if o.To > 0 {
			to = micro(o.To)
		} else if to <= from {
			to = from + time.Microsecond // one instant, or a window after the last event
		}
	}
	if to <= from {
		return 0, 0, fmt.Errorf("%w: %s to %s is empty", ErrWindow, FormatTimestamp(from), FormatTimestamp(to))
	}
	return from, to, nil
}

// RenderSVG draws t as an SVG timeline (see the top of this file).
func RenderSVG(t *Trace, opt TimelineOptions) (string, error) {
	from, to, err := opt.window(t)
	if err != nil {
		return "", err
	}
	plotLeft, plotWidth := svgPad, svgWidth-2*svgPad
	scale := plotWidth / float64(to-from)
	x := func(d time.Duration) float64 { return plotLeft + float64(d-from)*scale }

	// Draw the lanes first, into their own buffer, to learn which classes
	// the legend needs and how tall the figure is.
	tracks := laneTracks(t)
	lanes := make([]laneDrawing, len(tracks))
	used := map[string]bool{}      // classes drawn
	sliceUsed := map[string]bool{} // classes drawn as slices (else only as ticks)
	for i, tr := range tracks {
		lanes[i] = drawLane(tr, from, to, x)
		for _, c := range lanes[i].sliceClasses {
			used[c], sliceUsed[c] = true, true
		}
		for _, c := range lanes[i].tickClasses {
			used[c] = true
		}
	}

	title := opt.Title
	if title == "" {
		title = "Timeline of " + firstNonEmpty(t.Stage, t.ProcessName, "a softgpu trace")
	}
	var b strings.Builder
	y := svgPad

	// Title.
	var body strings.Builder
	if opt.Title != "" {
		for _, line := range wrap.Words(strings.Fields(opt.Title), int(plotWidth/titleAdvance)) {
			y += lineHeight
			fmt.Fprintf(&body, `<text x="%s" y="%s" font-size="%s" font-weight="600">%s</text>`+"\n", num(plotLeft), num(y-5), num(titleSize), escape(line))
		}
		y += 6
	}

	// Legend: the classes drawn, in table order, flowing into rows.
	legendX, legendY, items := plotLeft, y, 0
	for _, p := range paints {
		if !used[p.class] {
			continue
		}
		width := 22 + float64(len([]rune(p.label)))*charAdvance + 24
		if legendX+width > plotLeft+plotWidth && legendX > plotLeft {
			legendX, legendY = plotLeft, legendY+legendRow
		}
		if sliceUsed[p.class] {
			fmt.Fprintf(&body, `<rect class="%s" x="%s" y="%s" width="16" height="14"/>`, p.class, num(legendX), num(legendY+5))
		} else {
			fmt.Fprintf(&body, `<line class="%s" x1="%s" x2="%s" y1="%s" y2="%s" stroke-width="2"/>`, p.class, num(legendX+8), num(legendX+8), num(legendY+3), num(legendY+21))
		}
		fmt.Fprintf(&body, `<text x="%s" y="%s">%s</text>`+"\n", num(legendX+22), num(legendY+18), escape(p.label))
		legendX += width
		items++
	}
	if items > 0 {
		y = legendY + legendRow + 4
	}

	// Axis ticks, and their grid lines behind the lanes.
	ticks, unit := axisTicks(to - from)
	lanesTop := y
	lanesHeight := float64(len(lanes)) * (laneLabel + laneBar + laneGap)
	axisY := lanesTop + lanesHeight
	body.WriteString(`<g class="sgt-grid">` + "\n")
	for _, tick := range ticks {
		tx := x(from + tick)
		fmt.Fprintf(&body, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`+"\n", num(tx), num(tx), num(lanesTop), num(axisY))
	}
	body.WriteString("</g>\n")

	// Lanes.
	for i, tr := range tracks {
		label := truncate(tr.Name, int(plotWidth/charAdvance))
		fmt.Fprintf(&body, `<text x="%s" y="%s">%s</text>`+"\n", num(plotLeft), num(y+laneLabel-5), escape(label))
		barTop := y + laneLabel
		fmt.Fprintf(&body, `<rect class="sgt-band" x="%s" y="%s" width="%s" height="%s"/>`+"\n", num(plotLeft), num(barTop), num(plotWidth), num(laneBar))
		body.WriteString(lanes[i].render(barTop))
		y += laneLabel + laneBar + laneGap
	}

	// Axis.
	fmt.Fprintf(&body, `<line class="sgt-axis" x1="%s" x2="%s" y1="%s" y2="%s"/>`+"\n", num(plotLeft), num(plotLeft+plotWidth), num(axisY), num(axisY))
	for i, tick := range ticks {
		tx := x(from + tick)
		anchor := "middle"
		switch {
		case i == 0:
			anchor = "start"
		case tx > plotLeft+plotWidth-40:
			anchor = "end"
		}
		fmt.Fprintf(&body, `<line class="sgt-axis" x1="%s" x2="%s" y1="%s" y2="%s"/>`, num(tx), num(tx), num(axisY), num(axisY+6))
		fmt.Fprintf(&body, `<text class="sgt-muted" x="%s" y="%s" text-anchor="%s">%s</text>`+"\n", num(tx), num(axisY+6+fontSize), anchor, escape(formatTick(tick, unit)))
	}
	y = axisY + 6 + fontSize + 6
	note := "time since the device opened (1 cycle = 1 ns)"
	if from > 0 {
		note = "time since " + FormatTimestamp(from) + " after the device opened (1 cycle = 1 ns)"
	}
	for _, line := range wrap.Words(strings.Fields(note), int(plotWidth/charAdvance)) {
		y += lineHeight
		fmt.Fprintf(&body, `<text class="sgt-muted" x="%s" y="%s">%s</text>`+"\n", num(plotLeft), num(y-5), escape(line))
	}

	// Caption.
	if opt.Caption != "" {
		y += 6
		for _, line := range wrap.Words(strings.Fields(opt.Caption), int(plotWidth/charAdvance)) {
			y += lineHeight
			fmt.Fprintf(&body, `<text x="%s" y="%s">%s</text>`+"\n", num(plotLeft), num(y-5), escape(line))
		}
	}
	height := math.Ceil(y + svgPad)

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="sgt-timeline" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s" font-family="system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif" font-size="%s" style="max-width:100%%;height:auto">`+"\n",
		num(svgWidth), num(height), num(svgWidth), num(height), escape(title), num(fontSize))
	fmt.Fprintf(&b, "<title>%s</title>\n", escape(title))
	fmt.Fprintf(&b, "<desc>%s</desc>\n", escape(describeTimeline(t, lanes, from, to)))
	b.WriteString(stylesheet())
	fmt.Fprintf(&b, `<rect class="sgt-bg" x="0" y="0" width="%s" height="%s" rx="4"/>`+"\n", num(svgWidth), num(height))
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return b.String(), nil
}

// laneTracks returns the tracks that get a lane: every engine, the driver
// and any other track, and the channels that have an event somewhere in
// the trace (not necessarily in the window, so that two windows of one
// trace have the same lanes). From stage 6 a trace names all 128 channels,
// and a lane for each would bury the two or three a workload used.
func laneTracks(t *Trace) []*Track {
	var out []*Track
	for _, tr := range t.Tracks {
		if tr.Kind != KindChannel || len(tr.Events) > 0 {
			out = append(out, tr)
		}
	}
	return out
}

// stylesheet is the SVG's <style>: every class's colours, light and dark.
func stylesheet() string {
	var light, dark strings.Builder
	light.WriteString(".sgt-timeline text{fill:#1f2328}\n")
	dark.WriteString(".sgt-timeline text{fill:#e6e8eb}\n")
	for _, c := range pageColours {
		fmt.Fprintf(&light, ".sgt-timeline .%s{%s}\n", c[0], c[1])
		fmt.Fprintf(&dark, ".sgt-timeline .%s{%s}\n", c[0], c[2])
	}
	for _, p := range paints {
		for _, v := range []struct {
			w             *strings.Builder
			fill, outline string
		}{{&light, p.light, p.lightOutline}, {&dark, p.dark, p.darkOutline}} {
			if v.outline != "" {
				fmt.Fprintf(v.w, ".sgt-timeline rect.%s{fill:%s;stroke:%s}\n", p.class, v.fill, v.outline)
			} else {
				fmt.Fprintf(v.w, ".sgt-timeline rect.%s{fill:%s}\n", p.class, v.fill)
			}
			fmt.Fprintf(v.w, ".sgt-timeline line.%s{stroke:%s}\n", p.class, v.fill)
		}
	}
	return "<style>\n" + light.String() + "@media (prefers-color-scheme: dark){\n" + dark.String() + "}\n</style>\n"
}

// laneDrawing is one lane's slices and ticks, laid out along x.
type laneDrawing struct {
	name         string
	events       int // events at least partly in the window
	slices       []mark
	ticks        []mark
	sliceClasses []string // in order of first use
	tickClasses  []string
}

// mark is one drawn rectangle or tick: one event, or several merged.
type mark struct {
	class      string
	depth      int // slices: how many slices enclose it
	x0, x1     float64
	filled     float64 // slices: the units of x0..x1 the merged events cover (overlaps counted twice)
	count      int
	busy       time.Duration // slices: the merged events' time inside the window
	start, end time.Duration // the first event's start, the last one's end
	names      []nameCount   // merged: how many of each name, in order of first appearance
	single     *Event        // the event, when count == 1
}

type nameCount struct {
	name  string
	count int
}

// add merges event e, which ends at x1 and covers filled units of it, into m.
func (m *mark) add(e *Event, x1, filled float64, busy time.Duration) {
	m.x1 = max(m.x1, x1)
	m.filled += filled
	m.count++
	m.busy += busy
	m.end = max(m.end, e.End())
	m.single = nil
	for i := range m.names {
		if m.names[i].name == e.Name {
			m.names[i].count++
			return
		}
	}
	m.names = append(m.names, nameCount{e.Name, 1})
}

// drawLane lays out a track's events inside [from, to]: slices (X, and
// B/E pairs) first, then instants; counters are not drawn.
func drawLane(tr *Track, from, to time.Duration, x func(time.Duration) float64) laneDrawing {
	d := laneDrawing{name: tr.Name}
	var slice *mark
	flushSlice := func() {
		if slice != nil {
			d.slices = append(d.slices, *slice)
			d.sliceClasses = appendNew(d.sliceClasses, slice.class)
			slice = nil
		}
	}
	var open []time.Duration // ends of the slices enclosing the current one
	for _, e := range laneSlices(tr) {
		for len(open) > 0 && open[len(open)-1] <= e.Start {
			open = open[:len(open)-1]
		}
		depth := len(open)
		open = append(open, e.End())
		if e.End() < from || e.Start > to {
			continue
		}
		d.events++
		start, end := max(e.Start, from), min(e.End(), to)
		x0, x1 := x(start), x(end)
		class := classOf(&e)
		narrow := x1-x0 < minWidth
		// slice, when not nil, is a run of narrow slices: a wide one is
		// flushed as soon as it is made.
		if slice != nil && narrow && slice.class == class && slice.depth == depth && x0-slice.x1 < minWidth {
			slice.add(&e, x1, x1-x0, end-start)
			continue
		}
		flushSlice()
		slice = &mark{class: class, depth: depth, x0: x0, x1: x1, filled: x1 - x0, count: 1, busy: end - start,
			start: e.Start, end: e.End(), names: []nameCount{{e.Name, 1}}, single: &e}
		if !narrow {
			flushSlice()
		}
	}
	flushSlice()

	var tick *mark
	flushTick := func() {
		if tick != nil {
			d.ticks = append(d.ticks, *tick)
			d.tickClasses = appendNew(d.tickClasses, tick.class)
			tick = nil
		}
	}
	for i := range tr.Events {
		e := &tr.Events[i]
		if e.Phase != PhaseInstant && e.Phase != PhaseInstantOld || e.Start < from || e.Start > to {
			continue
		}
		d.events++
		tx, class := x(e.Start), classOf(e)
		if tick != nil && tick.class == class && tx-tick.x1 < tickMerge {
			tick.add(e, tx, 0, 0)
			continue
		}
		flushTick()
		event := *e
		tick = &mark{class: class, x0: tx, x1: tx, count: 1, start: e.Start, end: e.Start,
			names: []nameCount{{e.Name, 1}}, single: &event}
	}
	flushTick()
	return d
}

// laneSlices returns a track's slices, X events and B/E pairs alike as X,
// by start, an enclosing slice before the ones it encloses.
func laneSlices(tr *Track) []Event {
	var out []Event
	var begun []Event // B events not yet ended
	for _, e := range tr.Events {
		switch e.Phase {
		case PhaseComplete:
			out = append(out, e)
		case PhaseBegin:
			begun = append(begun, e)
		case PhaseEnd:
			if n := len(begun); n > 0 {
				b := begun[n-1]
				begun = begun[:n-1]
				b.Phase, b.Duration = PhaseComplete, e.Start-b.Start
				out = append(out, b)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].Duration > out[j].Duration
	})
	return out
}

// render writes the lane's marks with the bar's top at barTop.
func (d laneDrawing) render(barTop float64) string {
	var b strings.Builder
	for _, m := range d.slices {
		width := max(m.x1-m.x0, minWidth)
		opacity := ""
		if m.count > 1 {
			// The fraction of the rectangle the merged slices fill, so a
			// sparse run reads paler than a solid one.
			fill := 1.0
			if m.x1 > m.x0 {
				fill = m.filled / (m.x1 - m.x0)
			}
			opacity = fmt.Sprintf(` fill-opacity="%s"`, strconv.FormatFloat(min(max(fill, 0.3), 1), 'f', 2, 64))
		}
		// A nested slice is drawn inset inside the one enclosing it,
		// outlined in the background's colour so that it shows even when
		// both are of one class.
		inset, nested := float64(min(m.depth, 3))*4, ""
		if m.depth > 0 {
			nested = " sgt-nested"
		}
		fmt.Fprintf(&b, `<rect class="%s%s" x="%s" y="%s" width="%s" height="%s"%s><title>%s</title></rect>`+"\n",
			m.class, nested, num(m.x0), num(barTop+3+inset), num(width), num(laneBar-6-2*inset), opacity, escape(m.tooltip(d.name)))
	}
	for _, m := range d.ticks {
		if m.x1-m.x0 >= tickMerge {
			// A dense run of instants: a band as wide as the run.
			fmt.Fprintf(&b, `<rect class="%s" x="%s" y="%s" width="%s" height="%s" fill-opacity="0.5"><title>%s</title></rect>`+"\n",
				m.class, num(m.x0), num(barTop-3), num(m.x1-m.x0), num(laneBar+6), escape(m.tooltip(d.name)))
			continue
		}
		fmt.Fprintf(&b, `<line class="%s" x1="%s" x2="%s" y1="%s" y2="%s" stroke-width="2"><title>%s</title></line>`+"\n",
			m.class, num(m.x0), num(m.x0), num(barTop-3), num(barTop+laneBar+3), escape(m.tooltip(d.name)))
	}
	return b.String()
}

// tooltip describes a mark: the event and its args, or what was merged.
func (m *mark) tooltip(lane string) string {
	if e := m.single; e != nil {
		s := e.Name
		if e.Category != "" {
			s += " (" + e.Category + ")"
		}
		s += " on " + lane + " at " + FormatTimestamp(e.Start)
		if e.Phase == PhaseComplete {
			s += " for " + FormatDuration(e.Duration)
		}
		if args := e.FormatArgs(); args != "" {
			s += ": " + args
		}
		return s
	}
	var names []string
	for i, n := range m.names {
		if i == 5 {
			names = append(names, "…")
			break
		}
		names = append(names, fmt.Sprintf("%s ×%d", n.name, n.count))
	}
	s := fmt.Sprintf("%d events on %s from %s to %s", m.count, lane, FormatTimestamp(m.start), FormatTimestamp(m.end))
	if m.busy > 0 {
		s += ", " + FormatDuration(m.busy) + " of them in all"
	}
	return s + ": " + strings.Join(names, ", ")
}

// describeTimeline is the figure as text, for screen readers.
func describeTimeline(t *Trace, lanes []laneDrawing, from, to time.Duration) string {
	parts := make([]string, len(lanes))
	for i, l := range lanes {
		parts[i] = fmt.Sprintf("%s: %d events", l.name, l.events)
	}
	return fmt.Sprintf("Timeline of %s from device time %s to %s, one lane per track. %s.",
		firstNonEmpty(t.Stage, "a softgpu trace"), FormatTimestamp(from), FormatTimestamp(to), strings.Join(parts, "; "))
}

// axisTicks chooses ticks from 0 to length at a step of 1, 2 or 5 × 10^k
// ns, at most maxTicks intervals, and the unit to label them in: the
// largest of ns, µs, ms, s that the last tick reaches ("0.5 µs", not
// "500 ns", beside "2.5 µs").
func axisTicks(length time.Duration) (ticks []time.Duration, unit time.Duration) {
	step := time.Duration(1)
	for power := time.Duration(1); ; power *= 10 {
		found := false
		for _, m := range []time.Duration{1, 2, 5} {
			if length/(m*power) <= maxTicks {
				step, found = m*power, true
				break
			}
		}
		if found {
			break
		}
	}
	for tick := time.Duration(0); tick <= length; tick += step {
		ticks = append(ticks, tick)
	}
	last := ticks[len(ticks)-1]
	switch {
	case last < time.Microsecond:
		unit = time.Nanosecond
	case last < time.Millisecond:
		unit = time.Microsecond
	case last < time.Second:
		unit = time.Millisecond
	default:
		unit = time.Second
	}
	return ticks, unit
}

// formatTick writes a tick in unit with just the decimals the step needs.
func formatTick(tick, unit time.Duration) string {
	if tick == 0 {
		return "0"
	}
	suffix := map[time.Duration]string{time.Nanosecond: " ns", time.Microsecond: " µs", time.Millisecond: " ms", time.Second: " s"}[unit]
	whole, frac := int64(tick/unit), int64(tick%unit)
	if frac == 0 {
		return strconv.FormatInt(whole, 10) + suffix
	}
	digits := len(strconv.FormatInt(int64(unit), 10)) - 1
	fraction := strings.TrimRight(leftPad(strconv.FormatInt(frac, 10), digits), "0")
	return strconv.FormatInt(whole, 10) + "." + fraction + suffix
}

// num writes a coordinate with at most two decimals.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// escape makes s safe as XML text or an attribute value.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&#39;")
		default:
			// XML 1.0 forbids most control characters even as references.
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
				b.WriteRune('\uFFFD')
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// truncate cuts s to at most n characters, ending in "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func appendNew(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
