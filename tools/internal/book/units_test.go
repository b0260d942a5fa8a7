package book

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{0.5, "ns/op", "0.500 ns"},
		{48.2, "ns/op", "48.2 ns"},
		{999.6, "ns/op", "1.00 µs"}, // rounds up into the next unit
		{1712.4, "ns/op", "1.71 µs"},
		{114000, "ns/op", "114 µs"},
		{2.5e6, "ns/op", "2.50 ms"},
		{3.2e9, "ns/op", "3.20 s"},
		{12345e9, "ns/op", "12345 s"},
		{210000, "p99-ns", "210 µs"},
		{950, "p50-ns", "950 ns"},
		{9.2e9, "B/s", "9.20 GB/s"},
		{469e6, "B/s", "469 MB/s"},
		{65600, "MB/s", "65.6 GB/s"},
		{29, "MB/s", "29.0 MB/s"},
		{52, "GB/s", "52.0 GB/s"},
		{2.013, "cores", "2.01 cores"},
		{0.04, "cores", "0.04 cores"},
		{0.94, "preempts/op", "0.940 preempts/op"},
		{1234.5, "B/op", "1235 B/op"},
		{8.7, "us/page", "8.70 µs/page"},
		{0, "wakeups/op", "0 wakeups/op"},
		{1.2514, "ratio", "1.25×"},
		{0.8731, "p99-ratio", "0.873×"},
		{-0.4813, "onpath-share", "-0.481"},
		{0.413, "onpath-share", "0.413"},
		{1.5, "iterations", "1.50 iterations"}, // "ratio" only as the whole unit or its suffix
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FormatValue(tt.v, tt.unit), "FormatValue(%g, %q)", tt.v, tt.unit)
	}
}

func TestFormatTickAndRatio(t *testing.T) {
	ticks := []struct {
		v    float64
		unit string
		want string
	}{
		{1000, "ns/op", "1 µs"},
		{100, "ns/op", "100 ns"},
		{2e9, "B/s", "2 GB/s"},
		{0.5, "cores", "0.5 cores"},
	}
	for _, tt := range ticks {
		assert.Equal(t, tt.want, formatTick(tt.v, tt.unit), "formatTick(%g, %q)", tt.v, tt.unit)
	}
	ratios := []struct {
		r    float64
		want string
	}{
		{3.17, "3.2×"}, {0.8421, "0.84×"}, {1, "1.0×"}, {12.4, "12×"}, {35.06, "35×"},
	}
	for _, tt := range ratios {
		assert.Equal(t, tt.want, formatRatio(tt.r), "formatRatio(%g)", tt.r)
	}
}

func TestTableCell(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{1712.4, "ns/op", "1.71 µs"},
		{9.6e9, "B/s", "9.60 GB/s"},
		{2.013, "cores", "2.01"},
		{0.5, "wakeups/op", "0.500"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tableCell(tt.v, tt.unit), "tableCell(%g, %q)", tt.v, tt.unit)
	}
}

// A claim's figure is shown with as many significant figures as it takes
// to satisfy the claim on the page too: a ratio of 1.089 claimed below
// 1.1 must not read "1.1× < 1.1×".
func TestClaimRatioText(t *testing.T) {
	lt := func(x, y float64) bool { return x < y }
	gt := func(x, y float64) bool { return x > y }
	for _, tt := range []struct {
		got, want float64
		holds     func(x, y float64) bool
		text      string
	}{
		{1.089, 1.1, lt, "1.09×"},
		{1.0996, 1.1, lt, "1.0996×"},
		{0.93, 0.9, gt, "0.93×"},
		{0.9012, 0.9, gt, "0.901×"},
		{0.88, 0.9, gt, "0.88×"}, // fails: shown as prose would
		{12.6, 5, gt, "13×"},
	} {
		if got := claimRatioText(tt.got, tt.want, tt.holds); got != tt.text {
			t.Errorf("claimRatioText(%g, %g) = %q; want %q", tt.got, tt.want, got, tt.text)
		}
	}
}
