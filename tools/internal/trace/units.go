package trace

import (
	"strconv"
	"strings"
	"time"
)

// This file writes times for a reader. A duration gets three significant
// figures in the largest unit that keeps it at or above 1 ("40 ns",
// "12.3 µs", "1.25 ms"); a point in device time is always microseconds with
// three decimals ("12.345 µs"), the ts a trace file holds, so that a
// reader can find it in Perfetto.

// FormatDuration writes d with three significant figures: "40 ns",
// "12.3 µs", "1.25 ms", "2.00 s".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	ns := float64(d)
	switch {
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + " ns"
	case d < time.Millisecond:
		return sigFigs(ns/1e3) + " µs"
	case d < time.Second:
		return sigFigs(ns/1e6) + " ms"
	}
	return sigFigs(ns/1e9) + " s"
}

// FormatTimestamp writes a point in device time as microseconds with three
// decimals: "12.345 µs".
func FormatTimestamp(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + strconv.FormatInt(int64(d/time.Microsecond), 10) + "." +
		leftPad(strconv.FormatInt(int64(d%time.Microsecond), 10), 3) + " µs"
}

// sigFigs writes v (1 <= v < 1000) with three significant figures.
func sigFigs(v float64) string {
	decimals := 0
	switch {
	case v < 10:
		decimals = 2
	case v < 100:
		decimals = 1
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	// Rounding can carry into a fourth figure (999.6 → "1000"); that is
	// still the right value, one figure longer.
	return s
}

// formatPercent writes part/whole as a percentage with one decimal.
func formatPercent(part, whole time.Duration) string {
	if whole <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

func leftPad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat("0", width-len(s)) + s
}
