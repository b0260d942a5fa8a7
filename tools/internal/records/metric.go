package records

import (
	"math"
	"slices"
)

// NewMetric summarises the values of one unit, one per pass in pass order:
// best, median, min and max.
func NewMetric(unit string, values []float64) Metric {
	m := Metric{Unit: unit, Values: values, Best: Best(unit, values), Median: Median(values)}
	if len(values) > 0 {
		m.Min, m.Max = minMax(values)
	}
	return m
}

// Best returns the best of values for unit: the highest for a rate, the
// lowest otherwise; 0 for none.
func Best(unit string, values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	if HigherIsBetter(unit) {
		return slices.Max(values)
	}
	return slices.Min(values)
}

// Median returns the median of values: the middle value of an odd count
// and the lower of the middle two of an even count, never their mean, so
// that a median is always a value some pass observed (a chart of medians
// plots measurements, not interpolations). 0 for none.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func minMax(values []float64) (lo, hi float64) {
	return slices.Min(values), slices.Max(values)
}

// Spread is how far the passes disagree, relative to the median:
// (max − min) / median. 0 when every pass gave the same value (or there is
// at most one); +Inf when the median is 0 but the values differ.
func (m Metric) Spread() float64 {
	if m.Max == m.Min {
		return 0
	}
	if m.Median == 0 {
		return math.Inf(1)
	}
	return (m.Max - m.Min) / math.Abs(m.Median)
}

// Ratio is how much the canary moved during the row: the slower of the two
// readings over the faster (1 for a canary that held still); +Inf when a
// reading is not positive.
func (c RowCanary) Ratio() float64 {
	lo, hi := math.Min(c.Before, c.After), math.Max(c.Before, c.After)
	if lo <= 0 {
		return math.Inf(1)
	}
	return hi / lo
}

// Steady reports whether the row ran in one placement: Ratio() is at most
// tolerance (a record's CanaryTolerance()).
func (c RowCanary) Steady(tolerance float64) bool {
	return c.Ratio() <= tolerance
}

// CanaryOf returns the row's canary for pass (1-based), if the row carries
// one.
func (r Row) CanaryOf(pass int) (RowCanary, bool) {
	for _, c := range r.Canary {
		if c.Pass == pass {
			return c, true
		}
	}
	return RowCanary{}, false
}

// SteadyPasses returns the passes (1-based, in order) in which the row's
// canary held within tolerance: the passes whose values were measured in
// one placement. A row without canaries (Baseline/..., a schema-1 record)
// returns nil: nothing is known either way.
func (r Row) SteadyPasses(tolerance float64) []int {
	var out []int
	for _, c := range r.Canary {
		if c.Steady(tolerance) {
			out = append(out, c.Pass)
		}
	}
	return out
}
