package book

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file says what a figure from a record is: which statistic of the
// accepted passes (median by default, best, or what one pass measured), how
// far the passes spread, and whether that spread makes the row noisy. Every
// table, chart and inline figure goes through it, so they all name their
// statistic the same way and agree on what "noisy" means.
//
// The spread is the range of the accepted passes: min and max of the
// metric's values (the record's own Min and Max when it has them). Tables
// write it as ± half the range, as a share of the median; a row is noisy
// when (max − min)/median exceeds the threshold (noisy=, default 15 %).

// defaultNoisy is the spread, (max − min)/median, above which a row is
// marked noisy unless a directive says otherwise.
const defaultNoisy = 0.15

// defaultStat is the statistic a figure shows unless stat= says otherwise:
// the median is a value some pass came close to, where the best pass flatters.
const defaultStat = "median"

// figure is one metric of one row, converted to the unit it was asked in.
type figure struct {
	Value    float64 // the statistic asked for
	Stat     string  // "median", "best", "lowest", "highest" or "passN"
	Median   float64
	Min, Max float64 // over the accepted passes; both Value when unknown
	Passes   int     // values behind Min and Max
}

// rowFigure returns row's metric in unit as a figure of stat. A bandwidth
// asked for in one unit is found in any of B/s, MB/s and GB/s and converted,
// since records may store either. stat=passN must have been checked by
// checkPass.
func rowFigure(row records.Row, unit, stat string) (figure, bool) {
	m, scale, ok := findMetric(row, unit)
	if !ok {
		return figure{}, false
	}
	f := figure{Stat: stat, Median: m.Median * scale, Passes: len(m.Values)}
	lo, hi := metricRange(m)
	f.Min, f.Max = lo*scale, hi*scale
	switch n, isPass := passNumber(stat); {
	case isPass && n > len(m.Values):
		return figure{}, false // checkPass says why, for the record in question
	case isPass:
		f.Value = m.Values[n-1] * scale
	case stat == "best":
		f.Value = m.Best * scale
	case stat == "lowest":
		f.Value = f.Min
	case stat == "highest":
		f.Value = f.Max
	default:
		f.Value = f.Median
	}
	if f.Passes == 0 {
		f.Min, f.Max = f.Value, f.Value
	}
	return f, true
}

// findMetric finds unit in row, or for a bandwidth the same quantity in
// another bandwidth unit, with the factor that converts it.
func findMetric(row records.Row, unit string) (records.Metric, float64, bool) {
	if m, ok := row.Metric(unit); ok {
		return m, 1, true
	}
	if classify(unit) == kindBandwidth {
		for _, other := range []string{"B/s", "MB/s", "GB/s"} {
			if m, ok := row.Metric(other); ok {
				return m, bytesPerSecond(other) / bytesPerSecond(unit), true
			}
		}
	}
	return records.Metric{}, 0, false
}

// metricRange is the smallest and largest value of m's accepted passes.
func metricRange(m records.Metric) (lo, hi float64) {
	if m.Min != 0 || m.Max != 0 {
		return m.Min, m.Max
	}
	if len(m.Values) == 0 {
		return m.Median, m.Median
	}
	return slices.Min(m.Values), slices.Max(m.Values)
}

// hasSpread reports whether f has a range worth showing: more than one pass
// behind it, and a statistic of several passes (one pass's value has none).
func (f figure) hasSpread() bool {
	_, isPass := passNumber(f.Stat)
	oneEnd := f.Stat == "lowest" || f.Stat == "highest" // an end of the spread, not a figure within it
	return f.Passes > 1 && !isPass && !oneEnd && f.Median != 0
}

// spread is (max − min)/median, the figure's noise; 0 without a spread.
func (f figure) spread() float64 {
	if !f.hasSpread() {
		return 0
	}
	return (f.Max - f.Min) / math.Abs(f.Median)
}

// noisy reports whether f spreads more than threshold.
func (f figure) noisy(threshold float64) bool {
	return f.hasSpread() && f.spread() > threshold
}

// plusMinus writes half the range as a share of the median: "±12%"; a
// spread past wideSpread is written as the range itself, "1.2 µs–3.4 ms",
// since "±17096%" says nothing a reader can use.
func (f figure) plusMinus(unit string) string {
	if f.spread() > wideSpread {
		return FormatValue(f.Min, unit) + "–" + FormatValue(f.Max, unit)
	}
	return "±" + percent(f.spread()/2)
}

// wideSpread is the (max − min)/median past which a spread is printed as
// min–max rather than ± a percentage.
const wideSpread = 1.0

// percent writes a fraction as a percentage a reader can take in: whole
// percents, with one decimal under 10 % and "<0.1%" below that.
func percent(frac float64) string {
	p := frac * 100
	switch {
	case p == 0:
		return "0%"
	case p < 0.1:
		return "<0.1%"
	case p < 10:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(math.Round(p), 'f', 0, 64) + "%"
}

// rangeText describes f's passes for a tooltip: "median of 5 passes;
// min 1.70 µs, max 1.93 µs; (max − min)/median 13%".
func (f figure) rangeText(unit string) string {
	s := statPhrase(f.Stat, f.Passes)
	if f.hasSpread() {
		s += fmt.Sprintf("; min %s, max %s; (max − min)/median %s", FormatValue(f.Min, unit), FormatValue(f.Max, unit), percent(f.spread()))
	}
	return s
}

// statPhrase names a statistic for a reader: "median of 5 passes", "best of
// 5 passes", "pass 2 of 5", "one pass".
func statPhrase(stat string, passes int) string {
	if n, ok := passNumber(stat); ok {
		return fmt.Sprintf("pass %d of %d", n, passes)
	}
	if passes <= 1 {
		return "one pass"
	}
	switch stat {
	case "both":
		stat = "best and median"
	case "lowest", "highest":
		return fmt.Sprintf("the %s of %d passes", stat, passes)
	}
	return fmt.Sprintf("%s of %d passes", stat, passes)
}

// statHeader is the statistic's name in a column header or an axis label.
func statHeader(stat string) string {
	if n, ok := passNumber(stat); ok {
		return "pass " + strconv.Itoa(n)
	}
	return stat
}

// parseNoisy reads noisy=: the spread above which a row is marked noisy,
// as a fraction (0.25) or a percentage (25%).
func parseNoisy(d directive) (float64, error) {
	s, ok := d.Args["noisy"]
	if !ok {
		return defaultNoisy, nil
	}
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, d.errorf("noisy=%s: want a spread such as 0.25 or 25%%", s)
	}
	return v, nil
}

// recordDirty reports whether rec was made from a tree with uncommitted
// changes.
func recordDirty(rec *records.Record) bool {
	return rec.Dirty || strings.Contains(rec.Commit, "+dirty")
}

// dirtyNote is the visible flag on everything drawn from a dirty record.
const dirtyNote = "made from a modified tree"

// rowCanaries is row's canary per kept value, in the order of the metric
// values; nil when the record has none per row.
func rowCanaries(row records.Row) []records.RowCanary {
	return row.Canary
}
