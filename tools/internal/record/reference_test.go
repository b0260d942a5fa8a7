package record

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/records"
)

// TestReferenceRecord loads book/records/reference.json, the transcription
// of seed 004's tables, and checks it against those tables.
func TestReferenceRecord(t *testing.T) {
	rec, err := records.Load("../../../book/records/reference.json")
	require.NoError(t, err)
	if !rec.Reference || !rec.Transcribed || rec.Machine.Label != "reference VM" || rec.Machine.Cores != 6 || rec.Source == "" || len(rec.Canary) != 0 {
		t.Errorf("reference record = reference %v, transcribed %v, label %q, cores %d, source %q, %d canaries; want true, true, reference VM, 6, a source, none",
			rec.Reference, rec.Transcribed, rec.Machine.Label, rec.Machine.Cores, rec.Source, len(rec.Canary))
	}
	tests := []struct {
		stage, benchmark, unit string
		want                   float64
	}{
		{"stage3-pinned", "H2D/mem=pinned/size=1MiB", "B/s", 65.6e9},
		{"stage4-nolock", "H2D/mem=pinned/size=1MiB", "B/s", 52.0e9},
		{"stage7-idle", "H2D/mem=pinned/size=1MiB", "B/s", 39.5e9},
		{"stage5-vm", "H2D/mem=pinned/size=1MiB", "B/s", 9.0e9},
		{"stage8-managed", "Managed/prefetch=16/size=1MiB", "B/s", 469e6},
		{"stage8-managed", "Managed/prefetch=16/size=1MiB", "us/page", 8.7},
		{"stage8-managed", "Managed/prefetch=0/size=1MiB", "B/s", 29e6},
		{"stage8-managed", "Managed/prefetch=0/size=1MiB", "us/page", 140},
		{"stage8-managed", "Managed/idle=spin/prefetch=16/size=1MiB", "B/s", 883e6},
		{"stage8-managed", "Managed/idle=spin/prefetch=16/size=1MiB", "us/page", 4.6},
		{"stage6-runlist", "Runlist/slice=none/prio=equal", "first-probe-ns", 210e3},
		{"stage6-runlist", "Runlist/slice=none/prio=equal", "B/s", 39.2e9},
		{"stage6-runlist", "Runlist/slice=none/prio=equal", "preempts/op", 0},
		{"stage6-runlist", "Runlist/slice=50us/prio=equal", "first-probe-ns", 78e3},
		{"stage6-runlist", "Runlist/slice=50us/prio=equal", "B/s", 39.2e9},
		{"stage6-runlist", "Runlist/slice=50us/prio=equal", "preempts/op", 0.09},
		{"stage6-runlist", "Runlist/slice=5us/prio=equal", "first-probe-ns", 2.7e3},
		{"stage6-runlist", "Runlist/slice=5us/prio=equal", "B/s", 24.9e9},
		{"stage6-runlist", "Runlist/slice=5us/prio=equal", "preempts/op", 0.94},
		{"stage6-runlist", "Runlist/slice=none/prio=high", "first-probe-ns", 28e3},
		{"stage6-runlist", "Runlist/slice=none/prio=high", "preempts/op", 0.10},
	}
	metrics := 0
	for _, r := range rec.Rows {
		metrics += len(r.Metrics)
	}
	assert.Equal(t, len(tests), metrics, "reference record has %d metrics", metrics)
	for _, tt := range tests {
		row, ok := rec.Find(tt.stage, tt.benchmark)
		if !ok {
			t.Errorf("reference record has no row %s %s", tt.stage, tt.benchmark)
			continue
		}
		m, ok := row.Metric(tt.unit)
		if !ok || m.Best != tt.want || m.Median != tt.want || len(m.Values) != 1 || m.Values[0] != tt.want {
			t.Errorf("reference %s %s %s = %+v, %v; want best = median = values[0] = %v", tt.stage, tt.benchmark, tt.unit, m, ok, tt.want)
		}
	}
	if row, ok := rec.Find("stage6-runlist", "Runlist/slice=none/prio=high"); ok {
		if _, has := row.Metric("B/s"); has {
			t.Errorf("priority row has a B/s metric; the seed gives none (—)")
		}
	}
}
