package book

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file implements {{#chart}}: an inline SVG drawn from a record when
// the book is built.
//
// Benchmark names are Family/k1=v1/k2=v2. The x axis takes the values of one
// key (x=KEY), in the order they first appear, as categories; each value of
// another key (series=KEY), or each stage when several are given, is a
// series. The pseudo-keys stage, family and name (the whole benchmark name)
// work for both. With neither given, the chart picks the keys that vary.
// Categories that are stages or names are drawn as grouped bars, parameter
// values (sizes, gaps, depths) as lines; type=bar|line overrides. The y axis
// goes logarithmic when the data span more than 1.5 decades (log=auto), or
// when told (log=on|off).

// logThreshold is the span of the data, in decades, above which log=auto
// picks a logarithmic axis.
const logThreshold = 1.5

// chartData is what a chart draws, independent of the record it came from.
type chartData struct {
	Title   string
	YLabel  string
	XLabel  string
	Unit    string
	Stat    string   // what the values are, for tooltips: "median of 5 passes"
	X       []string // categories, in order
	Series  []chartSeries
	Marks   []chartMark
	Log     bool
	Bars    bool
	Caption string
}

type chartSeries struct {
	Name   string
	Values []float64 // per category
	Has    []bool    // whether Values[i] is present
	Lo, Hi []float64 // the passes' range per category; Lo[i] == Hi[i] when there is none
}

// hasRange reports whether point i has a spread to draw.
func (s chartSeries) hasRange(i int) bool {
	return s.Has[i] && s.Hi[i] > s.Lo[i]
}

// chartMark is a vertical line the chapter asked for with marks=.
type chartMark struct {
	Pos   float64 // in category units: 0 is the first category, 1.5 half way from the second to the third
	Label string
}

// benchKeys splits "Family/k1=v1/k2=v2" into its family and key values; a
// part without '=' is keyed by its position ("2" for the second part).
func benchKeys(name string) (family string, keys []string, values map[string]string) {
	parts := strings.Split(name, "/")
	values = map[string]string{}
	for i, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			k, v = strconv.Itoa(i+1), p
		}
		keys = append(keys, k)
		values[k] = v
	}
	return parts[0], keys, values
}

// chartPoint is one row of the record as the chart sees it.
type chartPoint struct {
	stage string
	row   records.Row
}

func keyValue(p chartPoint, key string) (string, bool) {
	family, _, values := benchKeys(p.row.Benchmark)
	switch key {
	case "":
		return "", true
	case "stage":
		return p.stage, true
	case "family":
		return family, true
	case "name":
		return p.row.Benchmark, true
	}
	v, ok := values[key]
	return v, ok
}

// chartHTML renders {{#chart record= stage= bench= unit= [x=] [series=] [log=] [ref=] [title=] [stat=] [type=] [marks=] [caption=]}}.
func (b *builder) chartHTML(d directive, prefix string) (string, error) {
	if err := d.allow("record", "stage", "bench", "unit", "x", "series", "log", "ref", "title", "stat", "type", "marks", "caption"); err != nil {
		return "", err
	}
	sel, err := b.selectRows(d)
	if err != nil {
		return "", err
	}
	rec, ref, stageList := sel.rec, sel.ref, sel.stages
	unit, err := d.require("unit")
	if err != nil {
		return "", err
	}
	stat, err := parseStat(d, false)
	if err != nil {
		return "", err
	}
	if err := checkPassRows(d, sel, stat); err != nil {
		return "", err
	}
	var points []chartPoint
	for i, st := range stageList {
		for _, r := range sel.rows[i] {
			points = append(points, chartPoint{stage: st, row: r})
		}
	}
	all := sel.all()
	if err := checkUnit(all, unit); err != nil {
		return "", d.errorf("%v", err)
	}

	xKey, seriesKey, err := chooseKeys(d, points, len(stageList) > 1)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	data := &chartData{Unit: unit, XLabel: axisName(xKey)}

	// Lay the points out: categories and series in order of appearance.
	xIndex := map[string]int{}
	seriesIndex := map[string]int{}
	type cell struct{ series, x int }
	owner := map[cell]string{}
	anySpread := false
	add := func(seriesName, xv string, f figure, bench string) error {
		xi, ok := xIndex[xv]
		if !ok {
			xi = len(data.X)
			xIndex[xv] = xi
			data.X = append(data.X, xv)
			for i := range data.Series {
				s := &data.Series[i]
				s.Values, s.Has = append(s.Values, 0), append(s.Has, false)
				s.Lo, s.Hi = append(s.Lo, 0), append(s.Hi, 0)
			}
		}
		si, ok := seriesIndex[seriesName]
		if !ok {
			si = len(data.Series)
			seriesIndex[seriesName] = si
			n := len(data.X)
			data.Series = append(data.Series, chartSeries{Name: seriesName, Values: make([]float64, n), Has: make([]bool, n), Lo: make([]float64, n), Hi: make([]float64, n)})
		}
		c := cell{si, xi}
		if prev, dup := owner[c]; dup {
			return fmt.Errorf("%s and %s both land on x=%s in series %q: choose x= and series= keys, or narrow bench=", prev, bench, xv, seriesName)
		}
		owner[c] = bench
		s := &data.Series[si]
		s.Values[xi], s.Has[xi] = f.Value, true
		s.Lo[xi], s.Hi[xi] = f.Value, f.Value
		if f.hasSpread() {
			s.Lo[xi], s.Hi[xi] = min(f.Min, f.Value), max(f.Max, f.Value)
			anySpread = anySpread || f.Max > f.Min
		}
		return nil
	}
	seriesName := func(p chartPoint, r *records.Record) string {
		sv, _ := keyValue(p, seriesKey)
		sv = displayKeyValue(sv)
		if seriesKey != "" && seriesKey != "stage" && seriesKey != "family" && seriesKey != "name" {
			sv = seriesKey + "=" + sv
		}
		if ref == nil {
			if sv == "" {
				return unitTitle(unit)
			}
			return sv
		}
		if sv == "" {
			return machineLabel(r)
		}
		return sv + " · " + machineLabel(r)
	}
	refFound := false
	for _, p := range points {
		xv, okX := keyValue(p, xKey)
		if !okX {
			return "", d.errorf("benchmark %s has no key %s=", p.row.Benchmark, xKey)
		}
		if _, ok := keyValue(p, seriesKey); !ok {
			return "", d.errorf("benchmark %s has no key %s=", p.row.Benchmark, seriesKey)
		}
		if f, ok := rowFigure(p.row, unit, stat); ok {
			if err := b.noteShown(d, rec, p.stage, p.row.Benchmark, unit, stat, f.Value); err != nil {
				return "", err
			}
			if err := add(seriesName(p, rec), xv, f, p.stage+" "+p.row.Benchmark); err != nil {
				return "", d.errorf("%v", err)
			}
		}
		if ref != nil {
			if rr, ok := findRow(ref, p.stage, p.row.Benchmark); ok {
				if f, ok := rowFigure(rr, unit, refStat(stat)); ok {
					refFound = true
					if err := add(seriesName(p, ref), xv, f, p.stage+" "+p.row.Benchmark+" ("+ref.Name+")"); err != nil {
						return "", d.errorf("%v", err)
					}
				}
			}
		}
	}
	if ref != nil && !refFound {
		return "", d.errorf("ref=%s has none of these benchmarks with unit %s", ref.Name, unit)
	}

	// Marks sit among the categories as they are in the benchmark names.
	if m := d.arg("marks", ""); m != "" {
		if data.Marks, err = placeMarks(data.X, m); err != nil {
			return "", d.errorf("marks=: %v", err)
		}
	}

	// Category labels for a reader: "3us" as "3µs"; whole benchmark names
	// without the parts every one of them shares.
	if xKey == "name" {
		data.X = shortNames(data.X)
	}
	for i, x := range data.X {
		data.X[i] = displayKeyValue(x)
	}

	// Scale.
	minV, maxV := data.valueRange()
	data.Log, err = chooseLog(minV, maxV, d.arg("log", "auto"))
	if err != nil {
		return "", d.errorf("%v (smallest value %s)", err, FormatValue(minV, unit))
	}
	switch typ := d.arg("type", ""); typ {
	case "":
		data.Bars = xKey == "stage" || xKey == "name" || xKey == "family"
	case "bar":
		data.Bars = true
	case "line":
	default:
		return "", d.errorf("type=%s: want bar or line", typ)
	}

	passes := acceptedPasses(rec)
	data.Stat = statPhrase(stat, passes)
	data.YLabel = unitTitle(unit) + ", " + data.Stat
	if data.Log {
		data.YLabel += " (log scale)"
	}
	data.Title = d.arg("title", "")
	if data.Title == "" {
		data.Title = autoTitle(points, unit, xKey)
	}
	data.Caption = d.arg("caption", "")

	var out strings.Builder
	out.WriteString(`<figure class="chart">` + "\n")
	out.WriteString(renderCharts(data))
	out.WriteString(chartTable(data))
	out.WriteString(figureEnd(data.Caption, statNote(stat, passes, anySpread, defaultNoisy, "chart")+b.provenance(prefix, rec, ref)))
	return out.String(), nil
}

// valueRange returns the smallest and largest value drawn, whiskers included.
func (data *chartData) valueRange() (minV, maxV float64) {
	minV, maxV = math.Inf(1), math.Inf(-1)
	for _, s := range data.Series {
		for i, v := range s.Values {
			if s.Has[i] {
				minV, maxV = math.Min(minV, v), math.Max(maxV, v)
			}
			if s.hasRange(i) {
				minV, maxV = math.Min(minV, s.Lo[i]), math.Max(maxV, s.Hi[i])
			}
		}
	}
	return minV, maxV
}

// chooseLog decides the y axis: log=auto goes logarithmic when the values
// span more than logThreshold decades, so that a 20 ns and a 2 µs figure are
// both readable; log=on and log=off force it.
func chooseLog(minV, maxV float64, mode string) (bool, error) {
	switch mode {
	case "auto":
		return minV > 0 && math.Log10(maxV/minV) > logThreshold, nil
	case "on":
		if minV <= 0 {
			return false, fmt.Errorf("log=on, but a log axis needs positive values")
		}
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("log=%s: want auto, on or off", mode)
}

// chooseKeys picks the x and series keys: those asked for, or else the keys
// whose values vary across the points.
func chooseKeys(d directive, points []chartPoint, manyStages bool) (x, series string, err error) {
	known := map[string]bool{"stage": true, "family": true, "name": true}
	var order []string
	distinct := map[string]map[string]bool{}
	note := func(k, v string) {
		if distinct[k] == nil {
			distinct[k] = map[string]bool{}
			order = append(order, k)
		}
		distinct[k][v] = true
	}
	for _, p := range points {
		family, keys, values := benchKeys(p.row.Benchmark)
		note("family", family)
		for _, k := range keys {
			known[k] = true
			note(k, values[k])
		}
	}
	var varying []string
	for _, k := range order {
		if len(distinct[k]) > 1 {
			varying = append(varying, k)
		}
	}
	for _, k := range []string{"x", "series"} {
		if v, ok := d.Args[k]; ok && !known[v] {
			var ks []string
			for _, o := range order {
				if o != "family" {
					ks = append(ks, o)
				}
			}
			return "", "", fmt.Errorf("%s=%s: no such key in these benchmark names (keys: %s; also stage, family, name)", k, v, strings.Join(ks, ", "))
		}
	}
	x, xGiven := d.Args["x"]
	series, seriesGiven := d.Args["series"]
	if !xGiven {
		switch {
		case manyStages && len(varying) == 0:
			x = "stage"
		case len(varying) > 0 && varying[0] != series:
			x = varying[0]
		case len(varying) > 1:
			x = varying[1]
		case manyStages:
			x = "stage"
		default:
			x = "name"
		}
	}
	if !seriesGiven {
		series = ""
		if manyStages && x != "stage" {
			series = "stage"
		} else if x != "name" { // a whole name leaves nothing to split by
			for _, k := range varying {
				if k != x {
					series = k
					break
				}
			}
		}
	}
	if x == series {
		return "", "", fmt.Errorf("x= and series= are both %s", x)
	}
	return x, series, nil
}

// shortNames drops from benchmark names the /-separated parts that all of
// them share: Managed/prefetch=0/size=1MiB and Managed/prefetch=16/size=1MiB
// become prefetch=0 and prefetch=16.
func shortNames(names []string) []string {
	if len(names) < 2 {
		return names
	}
	count := map[string]int{}
	for _, n := range names {
		seen := map[string]bool{}
		for _, p := range strings.Split(n, "/") {
			if !seen[p] {
				seen[p] = true
				count[p]++
			}
		}
	}
	out := make([]string, len(names))
	for i, n := range names {
		var kept []string
		for _, p := range strings.Split(n, "/") {
			if count[p] < len(names) {
				kept = append(kept, p)
			}
		}
		out[i] = strings.Join(kept, "/")
		if out[i] == "" {
			out[i] = n
		}
	}
	return out
}

var microsecondsRE = regexp.MustCompile(`^([0-9.]+)us$`)

// displayKeyValue writes a benchmark key's value for a reader: "3us" → "3µs".
func displayKeyValue(v string) string {
	return microsecondsRE.ReplaceAllString(v, "${1}µs")
}

func axisName(key string) string {
	switch key {
	case "name":
		return "benchmark"
	case "family":
		return "benchmark family"
	}
	return key
}

func autoTitle(points []chartPoint, unit, xKey string) string {
	var families []string
	seen := map[string]bool{}
	for _, p := range points {
		f, _, _ := benchKeys(p.row.Benchmark)
		if !seen[f] {
			seen[f] = true
			families = append(families, f)
		}
	}
	return fmt.Sprintf("%s: %s by %s", strings.Join(families, ", "), unitTitle(unit), axisName(xKey))
}
