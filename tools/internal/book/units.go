package book

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file turns a record's raw numbers into what a reader should see:
// nanoseconds scaled to ns/µs/ms/s, bandwidth in MB/s or GB/s, cores with two
// decimals, everything else to three significant figures. The same functions
// label chart axes, so a table and a chart of one record read alike.

// unitKind classifies a record unit by how its values are shown.
type unitKind int

const (
	kindTime      unitKind = iota // nanoseconds: ns/op, p50-ns, p99-ns, ...
	kindBandwidth                 // bytes per second, stored as B/s, MB/s or GB/s
	kindCores                     // process CPU seconds per wall second
	kindRatio                     // a quotient a benchmark reports itself: ratio, p99-ratio, ...
	kindShare                     // a share of something, possibly below zero: onpath-share
	kindOther                     // counts per op and anything else
)

func classify(unit string) unitKind {
	switch {
	case unit == "ns/op" || strings.HasSuffix(unit, "-ns"):
		return kindTime
	case unit == "B/s" || unit == "MB/s" || unit == "GB/s":
		return kindBandwidth
	case unit == "cores":
		return kindCores
	case unit == "ratio" || strings.HasSuffix(unit, "-ratio"):
		return kindRatio
	case strings.HasSuffix(unit, "-share"):
		return kindShare
	}
	return kindOther
}

// bytesPerSecond is the factor from a bandwidth unit to B/s. Go's testing
// package prints MB/s as 1e6 bytes per second, so the prefixes are decimal.
func bytesPerSecond(unit string) float64 {
	switch unit {
	case "MB/s":
		return 1e6
	case "GB/s":
		return 1e9
	}
	return 1
}

// FormatValue formats v, measured in unit, for a reader: "1.23 µs",
// "52.0 GB/s", "0.05 cores", "1.25×" (a ratio a benchmark reports), "1.50 wakeups/op".
func FormatValue(v float64, unit string) string {
	return formatValue(v, unit, false)
}

// formatTick is FormatValue for axis labels: trailing zeros trimmed, so a log
// axis reads "1 µs, 10 µs, 100 µs" rather than "1.00 µs".
func formatTick(v float64, unit string) string {
	return formatValue(v, unit, true)
}

func formatValue(v float64, unit string, trim bool) string {
	num := func(x float64) string {
		s := sigFigs(x, 3)
		if trim {
			s = trimZeros(s)
		}
		return s
	}
	switch classify(unit) {
	case kindTime:
		scaled, suffix := scaleTime(v)
		return num(scaled) + " " + suffix
	case kindBandwidth:
		bps := v * bytesPerSecond(unit)
		if math.Abs(bps) >= 1e9 {
			return num(bps/1e9) + " GB/s"
		}
		return num(bps/1e6) + " MB/s"
	case kindCores:
		s := strconv.FormatFloat(v, 'f', 2, 64)
		if trim {
			s = trimZeros(s)
		}
		return s + " cores"
	case kindRatio:
		return num(v) + "×" // "1.25×", as {{#ratio}} shows a quotient
	case kindShare:
		return num(v) // "0.413": the text or the column says a share of what
	}
	return num(v) + " " + displayUnit(unit)
}

// scaleTime picks the largest time unit in which ns is at least 1.
func scaleTime(ns float64) (float64, string) {
	a := math.Abs(roundSig(ns, 3))
	switch {
	case a >= 1e9:
		return ns / 1e9, "s"
	case a >= 1e6:
		return ns / 1e6, "ms"
	case a >= 1e3:
		return ns / 1e3, "µs"
	}
	return ns, "ns"
}

// displayUnit spells a raw unit the way prose does ("us/page" → "µs/page").
func displayUnit(unit string) string {
	if strings.HasPrefix(unit, "us/") {
		return "µs/" + strings.TrimPrefix(unit, "us/")
	}
	return unit
}

// unitTitle names a unit for a table header or an axis.
func unitTitle(unit string) string {
	switch classify(unit) {
	case kindTime:
		if unit == "ns/op" {
			return "time/op"
		}
		return strings.TrimSuffix(unit, "-ns") // "p99-ns" → "p99"
	case kindBandwidth:
		return "bandwidth"
	}
	return displayUnit(unit)
}

// roundSig rounds x to n significant figures.
func roundSig(x float64, n int) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// sigFigs formats x with n significant figures, never in exponent form.
// Values of 10^n and above are shown as whole numbers, since dropping their
// low digits would only hide what the record holds.
func sigFigs(x float64, n int) string {
	if x == 0 {
		return "0"
	}
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return fmt.Sprint(x)
	}
	r := roundSig(x, n)
	if math.Abs(r) >= math.Pow(10, float64(n)) {
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	// Decimals come from the rounded value, so 9.996 becomes "10.0", not "10.00".
	decimals := n - 1 - int(math.Floor(math.Log10(math.Abs(r))))
	if decimals < 0 {
		decimals = 0
	}
	return strconv.FormatFloat(r, 'f', decimals, 64)
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// claimRatioText is formatRatio with as many more significant figures as
// it takes for the figure shown to satisfy the claim as well: a ratio of
// 1.089 claimed below 1.1 reads "1.09×", not "1.1×".
func claimRatioText(got, want float64, holds func(x, y float64) bool) string {
	text := formatRatio(got)
	if !holds(got, want) {
		return text // the claim fails; its error shows the figure as prose would
	}
	for n := 3; n <= 6; n++ {
		if v, err := strconv.ParseFloat(strings.TrimSuffix(text, "×"), 64); err == nil && holds(v, want) {
			return text
		}
		text = sigFigs(got, n) + "×"
	}
	return text
}

// formatRatio formats a/b for prose: "3.2×", "0.84×", "12×".
func formatRatio(r float64) string {
	if math.Abs(r) >= 10 {
		return strconv.FormatFloat(math.Round(r), 'f', 0, 64) + "×"
	}
	return sigFigs(r, 2) + "×"
}
