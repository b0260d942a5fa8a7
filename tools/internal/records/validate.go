package records

import (
	"errors"
	"fmt"
	"math"
)

// Validate rejects a record holding a value no measurement can produce, so
// that a corrupt or hand-edited record fails the book build instead of
// printing nonsense. Every problem is reported, each naming the record, the
// row and the metric:
//
//   - a record without a name or without rows, or a machine with cores < 0;
//   - a row without a stage or benchmark name, without metrics, or listed
//     twice; a metric without a unit or without values;
//   - any value (and best, median, min, max) that is NaN or infinite, or
//     negative: every unit the benchmarks report is a time, a rate, a count
//     or cores, and none of those can be below zero;
//   - a rate (B/s and other .../s units) that is zero: nothing moved;
//   - min above max, or a best or median outside [min, max];
//   - a canary reading (the record's or a row's) that is not a positive,
//     finite number of nanoseconds; a negative re-run count;
//   - a transcription that does not name the document it was copied from,
//     or names a commit or a canary: it measured no tree.
func Validate(rec *Record) error {
	name := rec.Name
	if name == "" {
		name = "(unnamed)"
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("records: %s: "+format, append([]any{name}, a...)...))
	}
	if rec.Name == "" {
		bad("no name")
	}
	if rec.Machine.Cores < 0 {
		bad("machine cores %d: want 0 or more", rec.Machine.Cores)
	}
	if len(rec.Rows) == 0 {
		bad("no rows")
	}
	if rec.Transcribed {
		if rec.Source == "" {
			bad("transcribed, but no source: name the document the figures were copied from")
		}
		if rec.Commit != "" || len(rec.Canary) > 0 {
			bad("transcribed, but with a commit or a canary: a transcription measured no tree")
		}
	}
	for _, c := range rec.Canary {
		for _, v := range []float64{c.Before, c.After} {
			if !positive(v) {
				bad("canary of pass %d reads %v ns: want a positive time", c.Pass, v)
			}
		}
	}
	seen := map[[2]string]bool{}
	for _, rows := range [][]Row{rec.Limits, rec.Rows} {
		for _, r := range rows {
			where := r.Stage + " " + r.Benchmark
			if r.Stage == "" || r.Benchmark == "" {
				bad("row %q: no stage or no benchmark name", where)
			}
			if k := [2]string{r.Stage, r.Benchmark}; seen[k] {
				bad("%s: row listed twice", where)
			} else {
				seen[k] = true
			}
			if len(r.Metrics) == 0 {
				bad("%s: no metrics", where)
			}
			if r.Reruns < 0 {
				bad("%s: reruns %d: want 0 or more", where, r.Reruns)
			}
			for _, c := range r.Canary {
				for _, v := range []float64{c.Before, c.After} {
					if !positive(v) {
						bad("%s: canary of pass %d reads %v ns: want a positive time", where, c.Pass, v)
					}
				}
			}
			for _, m := range r.Metrics {
				for _, msg := range checkMetric(m) {
					bad("%s: %s", where, msg)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkMetric returns what is impossible about one metric.
func checkMetric(m Metric) []string {
	unit := m.Unit
	if unit == "" {
		return []string{"a metric has no unit"}
	}
	if len(m.Values) == 0 {
		return []string{unit + ": no values"}
	}
	var out []string
	rate := HigherIsBetter(unit)
	check := func(what string, v float64) {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			out = append(out, fmt.Sprintf("%s: %s is %v", unit, what, v))
		case v < 0 && !Signed(unit):
			out = append(out, fmt.Sprintf("%s: %s is %v: a measurement cannot be negative", unit, what, v))
		case rate && v == 0:
			out = append(out, fmt.Sprintf("%s: %s is 0: a rate must be positive", unit, what))
		}
	}
	for i, v := range m.Values {
		check(fmt.Sprintf("value %d", i+1), v)
	}
	check("best", m.Best)
	check("median", m.Median)
	check("min", m.Min)
	check("max", m.Max)
	if len(out) > 0 {
		return out
	}
	switch {
	case m.Min > m.Max:
		out = append(out, fmt.Sprintf("%s: min %v is above max %v", unit, m.Min, m.Max))
	case m.Best < m.Min || m.Best > m.Max:
		out = append(out, fmt.Sprintf("%s: best %v is outside [min %v, max %v]", unit, m.Best, m.Min, m.Max))
	case m.Median < m.Min || m.Median > m.Max:
		out = append(out, fmt.Sprintf("%s: median %v is outside [min %v, max %v]", unit, m.Median, m.Min, m.Max))
	}
	return out
}

func positive(v float64) bool {
	return v > 0 && !math.IsInf(v, 0)
}
