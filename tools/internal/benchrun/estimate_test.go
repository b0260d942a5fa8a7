package benchrun

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/benchfmt"
)

func TestParseBenchtime(t *testing.T) {
	tests := []struct {
		in      string
		want    Benchtime
		wantErr bool
	}{
		{"1s", Benchtime{Duration: time.Second}, false},
		{"300ms", Benchtime{Duration: 300 * time.Millisecond}, false},
		{"100x", Benchtime{Count: 100}, false},
		{"1x", Benchtime{Count: 1}, false},
		{"", Benchtime{}, true},
		{"0s", Benchtime{}, true},
		{"-1s", Benchtime{}, true},
		{"0x", Benchtime{}, true},
		{"-3x", Benchtime{}, true},
		{"x", Benchtime{}, true},
		{"1.5x", Benchtime{}, true},
		{"10", Benchtime{}, true}, // no unit: go test rejects it too
		{"1sec", Benchtime{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBenchtime(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseBenchtime(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
				t.Errorf("ParseBenchtime(%q) error %q does not name the value", tt.in, err)
			}
			if err == nil && got.String() != tt.in {
				t.Errorf("ParseBenchtime(%q).String() = %q; want it back", tt.in, got.String())
			}
		})
	}
}

func TestBenchtimeSet(t *testing.T) {
	var b Benchtime
	if err := b.Set("2s"); err != nil || b.Duration != 2*time.Second {
		t.Errorf("Set(2s) = %v, %+v", err, b)
	}
	err := b.Set("fast")
	if err == nil || strings.Contains(err.Error(), "-benchtime") {
		t.Errorf("Set(fast) = %v; want a reason without the flag's name (the flag package adds it)", err)
	}
}

func TestExactly(t *testing.T) {
	tests := []struct{ name, want string }{
		{"Gap/gap=30us", "^BenchmarkGap$/^gap=30us$"},
		{"Quiet", "^BenchmarkQuiet$"},
		{"H2D/mem=pinned/size=1MiB", "^BenchmarkH2D$/^mem=pinned$/^size=1MiB$"},
		{"X/a+b(c)", `^BenchmarkX$/^a\+b\(c\)$`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Exactly(tt.name), "Exactly(%q)", tt.name)
	}
}

func TestSurveyAndEstimate(t *testing.T) {
	var gotOpts Options
	run := func(ctx context.Context, stage string, o Options) (*benchfmt.Output, error) {
		gotOpts = o
		return benchfmt.ParseString("pkg: softgpu/" + stage + "\n" +
			"BenchmarkA/x=1-2 1 1000000 ns/op\nBenchmarkA/x=2-2 1 2000000 ns/op\nBenchmarkB-2 1 1000000 ns/op 3 cores\n")
	}
	s, err := SurveyStage(context.Background(), run, "stage0-mailbox", Options{Bench: "A|B", Benchtime: "1s", Count: 6})
	require.NoError(t, err)
	if gotOpts.Benchtime != "1x" || gotOpts.Count != 0 || gotOpts.Bench != "A|B" {
		t.Errorf("survey ran with %+v; want -bench A|B, 1x, count 1", gotOpts)
	}
	if len(s.Names) != 3 || s.Iter != 4*time.Millisecond {
		t.Errorf("survey = %+v; want 3 names, 4ms of iterations", s)
	}
	s.Wall = time.Second
	tests := []struct {
		bt   Benchtime
		want time.Duration
	}{
		{Benchtime{Duration: time.Second}, 4 * time.Second},
		{Benchtime{Duration: 300 * time.Millisecond}, 1900 * time.Millisecond},
		{Benchtime{Count: 101}, time.Second + 400*time.Millisecond},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, s.Estimate(tt.bt), "Estimate(%v)", tt.bt)
	}
	failing := func(context.Context, string, Options) (*benchfmt.Output, error) { return nil, errors.New("boom") }
	_, err = SurveyStage(context.Background(), failing, "stage0-mailbox", Options{})
	assert.Error(t, err, "SurveyStage of a failing run")
}

func TestETA(t *testing.T) {
	e := NewETA(map[string]time.Duration{"a": 10 * time.Second, "b": 20 * time.Second, "canary": time.Second})
	assert.Equal(t, 40*time.Second, e.Left([]string{"a", "b", "a"}), "Left before any step; want the guesses, 40s")
	e.Observe("a", 20*time.Second) // twice the guess: b is scaled alike
	assert.Equal(t, 40*time.Second, e.Of("b"), "Of(b) after a took twice its guess")
	e.Observe("b", 30*time.Second)
	assert.Equal(t, 50*time.Second+time.Second*50/30, e.Left([]string{"a", "b", "canary"}), "Left; want measured a and b, canary scaled by 50/30")
}

func TestApprox(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{42 * time.Second, "40s"},
		{4*time.Minute + 33*time.Second, "4m30s"},
		{3 * time.Minute, "3m"},
		{12*time.Minute + 40*time.Second, "13m"},
		{85 * time.Minute, "1h25m"},
		{0, "0s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Approx(tt.d), "Approx(%v)", tt.d)
	}
}
