package record

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testConfig(stages ...string) Config {
	return Config{
		Stages: stages, Bench: ".", Benchtime: "1x", Passes: 2,
		Threshold: 0.5, MaxRejects: 2, CanaryCount: 3, CanaryBenchtime: "10x",
	}
}

func TestMeasure(t *testing.T) {
	tests := []struct {
		name         string
		canary       []float64 // two per attempt: before, after
		passes       int
		maxRejects   int
		strict       bool
		wantAttempts []int // accepted attempt numbers
		wantRejected int
		wantNote     bool
		wantErr      error
	}{
		{
			name:         "calm",
			canary:       []float64{100, 105, 102, 101},
			passes:       2,
			maxRejects:   2,
			wantAttempts: []int{1, 2},
		},
		{
			name:         "slow pass re-run",
			canary:       []float64{100, 105, 100, 400, 101, 103},
			passes:       2,
			maxRejects:   2,
			wantAttempts: []int{1, 3},
			wantRejected: 1,
		},
		{
			name:         "early pass rejected by a later best",
			canary:       []float64{300, 310, 100, 100, 110, 105},
			passes:       2,
			maxRejects:   2,
			wantAttempts: []int{2, 3},
			wantRejected: 1,
		},
		{
			name:         "gives up, keeps the accepted passes",
			canary:       []float64{100, 100, 400, 400, 300, 300, 500, 500},
			passes:       2,
			maxRejects:   2,
			wantAttempts: []int{1},
			wantRejected: 3,
			wantNote:     true,
		},
		{
			name:         "gives up with none accepted, keeps the closest",
			canary:       []float64{100, 400, 300, 300},
			passes:       2,
			maxRejects:   1,
			wantAttempts: []int{2},
			wantRejected: 1,
			wantNote:     true,
		},
		{
			name:       "gives up, strict",
			canary:     []float64{100, 100, 400, 400, 300, 300, 500, 500},
			passes:     2,
			maxRejects: 2,
			strict:     true,
			wantErr:    ErrGaveUp,
		},
		{
			name:         "no re-runs allowed",
			canary:       []float64{100, 100, 400, 400},
			passes:       2,
			maxRejects:   0,
			wantAttempts: []int{1},
			wantRejected: 1,
			wantNote:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("stage0-mailbox", "stage1-ring")
			cfg.Passes, cfg.MaxRejects, cfg.Strict = tt.passes, tt.maxRejects, tt.strict
			fake := &fakeBencher{t: t, canary: tt.canary}
			res, err := Measure(context.Background(), cfg, fake)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Measure() error = %v; want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Measure(): %v", err)
			}
			if len(fake.canary) != 0 {
				t.Errorf("Measure() left canary values %v unused", fake.canary)
			}
			var got []int
			for _, p := range res.Passes {
				got = append(got, p.Attempt)
			}
			if !reflect.DeepEqual(got, tt.wantAttempts) {
				t.Errorf("Measure() accepted attempts %v; want %v", got, tt.wantAttempts)
			}
			if res.Rejected != tt.wantRejected {
				t.Errorf("Measure().Rejected = %d; want %d", res.Rejected, tt.wantRejected)
			}
			if (res.Note != "") != tt.wantNote {
				t.Errorf("Measure().Note = %q; want a note: %v", res.Note, tt.wantNote)
			}
			if n := len(tt.canary) / 2; len(res.Canary) != n {
				t.Errorf("Measure() recorded %d canaries; want %d, one per attempt", len(res.Canary), n)
			}
			for i, c := range res.Canary {
				if want := !contains(tt.wantAttempts, i+1); c.Rejected != want || c.Before != tt.canary[2*i] || c.After != tt.canary[2*i+1] {
					t.Errorf("canary %d = %+v; want before %v after %v rejected %v", i, c, tt.canary[2*i], tt.canary[2*i+1], want)
				}
			}
		})
	}
}

// TestMeasureOrder checks that passes alternate the stage order, bracketed
// by canaries.
func TestMeasureOrder(t *testing.T) {
	cfg := testConfig("stage0-mailbox", "stage1-ring", "stage2-fence")
	fake := &fakeBencher{t: t, canary: []float64{100, 100, 100, 100}}
	if _, err := Measure(context.Background(), cfg, fake); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"canary", "stage0-mailbox", "stage1-ring", "stage2-fence", "canary",
		"canary", "stage2-fence", "stage1-ring", "stage0-mailbox", "canary",
	}
	if !reflect.DeepEqual(fake.calls, want) {
		t.Errorf("Measure() ran %q; want %q", fake.calls, want)
	}
}

func TestMeasureCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Measure(ctx, testConfig("stage0-mailbox"), &fakeBencher{t: t, canary: []float64{100}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Measure(cancelled) error = %v; want context.Canceled", err)
	}
}

func TestMeasureProgress(t *testing.T) {
	var progress strings.Builder
	cfg := testConfig("stage0-mailbox", "stage1-ring")
	cfg.Progress = &progress
	if _, err := Measure(context.Background(), cfg, &fakeBencher{t: t, canary: []float64{100, 100, 100, 100}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pass 1 of 2 (attempt 1): stage0-mailbox (1/2)",
		"pass 2 of 2 (attempt 2): stage0-mailbox (2/2)",
		"left",
		"accepted",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not mention %q:\n%s", want, progress.String())
		}
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
