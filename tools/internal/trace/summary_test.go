package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSummarise checks every figure of the summary of good/stage7.json,
// worked out by hand from the file: its span is 0 to 215.050 µs.
func TestSummarise(t *testing.T) {
	s := Summarise(load(t, "good/stage7.json"))
	if s.Stage != "stage7-idle" || s.Events != 15 || s.Recorded != 15 || s.First != 0 || s.Last != 215050*time.Nanosecond {
		t.Errorf("Summarise: stage %q, %d events (%d recorded), span %v to %v; want stage7-idle, 15 (15), 0 to 215.05µs",
			s.Stage, s.Events, s.Recorded, s.First, s.Last)
	}
	want := []TrackSummary{
		{
			Name: "engine compute", Kind: KindEngine, PID: 1, TID: 1, Events: 2,
			Busy: 500, Asleep: 200000, IdleAwake: 215050 - 200500,
			Commands: []CommandCount{{Name: "DISPATCH", Status: "ok", Count: 1, Total: 500}},
			Sleeps:   1, // woken by close: no wake_ns
		},
		{
			Name: "engine copy", Kind: KindEngine, PID: 1, TID: 2, Events: 9,
			Busy: 750, Asleep: 200000, IdleAwake: 215050 - 200750,
			Commands: []CommandCount{
				{Name: "COPY", Status: "bad address", Count: 1, Total: 500},
				{Name: "FILL", Status: "ok", Count: 4, Total: 250},
			},
			Sleeps:     3,
			Wake:       Latency{Count: 3, P50: 7800, P99: 12000, Max: 12000},
			Interrupts: 1,
		},
		{Name: "channel 0", Kind: KindChannel, PID: 1, TID: 100, Events: 1, Doorbells: 1, DoorbellsWoke: 1},
		{Name: "channel 1", Kind: KindChannel, PID: 1, TID: 101, Events: 2, Doorbells: 2, DoorbellsWoke: 1},
		{Name: "driver", Kind: KindDriver, PID: 1, TID: 10, Events: 1, Interrupts: 1},
	}
	require.Equal(t, len(want), len(s.Tracks), "Summarise: %d tracks", len(s.Tracks))
	for i := range want {
		assert.Equal(t, want[i], s.Tracks[i], "track %d", i)
	}
	wantCounts := []Count{
		{"command", "COPY", 1}, {"command", "DISPATCH", 1}, {"command", "FILL", 4},
		{"doorbell", "doorbell", 3}, {"idle", "sleep", 4},
		{"irq", "irq handled", 1}, {"irq", "irq raise", 1},
	}
	assert.Equal(t, wantCounts, s.Counts, "Counts")
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name   string
		values []time.Duration
		want   Latency
	}{
		{"none", nil, Latency{}},
		{"one", []time.Duration{5}, Latency{1, 5, 5, 5}},
		{"two", []time.Duration{9, 1}, Latency{2, 1, 9, 9}},
		{"hundred", func() []time.Duration {
			var v []time.Duration
			for i := 100; i >= 1; i-- {
				v = append(v, time.Duration(i))
			}
			return v
		}(), Latency{100, 50, 99, 100}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, latency(tt.values), "latency(%s)", tt.name)
	}
}

func TestSummaryFormat(t *testing.T) {
	var out strings.Builder
	require.NoError(t, Summarise(load(t, "good/stage7.json")).Format(&out))
	// Rows, with tabwriter's padding collapsed to single spaces.
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"stage7-idle: 15 events, 0 dropped; span 215 µs, from 0.000 µs to 215.050 µs",
		"engine busy asleep idle awake commands sleeps wake p50 wake p99 wake max",
		"engine compute 500 ns 0.2% 200 µs 93.0% 14.6 µs 6.8% 1 1 - - -",
		"engine copy 750 ns 0.3% 200 µs 93.0% 14.3 µs 6.6% 5 3 7.80 µs 12.0 µs 12.0 µs",
		"COPY engine copy bad address 1 500 ns 500 ns",
		"FILL engine copy ok 4 250 ns 62 ns",
		"channel 1 2 2 1 0",
		"driver 1 0 0 1",
		"idle sleep 4",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Format output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(text, "warning") {
		t.Errorf("Format warns on a trace that dropped nothing:\n%s", out.String())
	}

	out.Reset()
	require.NoError(t, Summarise(load(t, "good/later-stages.json")).Format(&out))
	if !strings.Contains(out.String(), "overwrote 2 events") {
		t.Errorf("Format of a trace with 2 dropped events does not warn:\n%s", out.String())
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ns"},
		{40, "40 ns"},
		{999, "999 ns"},
		{1000, "1.00 µs"},
		{12345, "12.3 µs"},
		{215050, "215 µs"},
		{1250000, "1.25 ms"},
		{2 * time.Second, "2.00 s"},
		{-40, "-40 ns"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FormatDuration(tt.d), "FormatDuration(%d)", int64(tt.d))
	}
}

func TestFormatTimestamp(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000 µs"},
		{7, "0.007 µs"},
		{12345, "12.345 µs"},
		{215050, "215.050 µs"},
		{-1500, "-1.500 µs"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FormatTimestamp(tt.d), "FormatTimestamp(%d)", int64(tt.d))
	}
}
