package benchrun

import (
	"context"
	"fmt"
	"time"

	"softgpu/tools/internal/benchfmt"
)

// Estimates. A long run (record: every stage, five passes; compare: two
// stages, six rounds) says how long it will take before it starts and how
// long is left as it goes. Before anything is measured, a survey runs each
// stage's selected benchmarks once (-test.benchtime 1x): it counts them,
// times the set-up they do (opening devices, allocating), and stops a
// broken benchmark within seconds rather than an hour into the run. As
// stages finish, their measured durations replace the guesses.

// RunFunc runs benchmarks of a stage: Set.Bench, or a script in tests.
type RunFunc func(ctx context.Context, stage string, o Options) (*benchfmt.Output, error)

// Survey is what one run of a stage's selected benchmarks at
// -test.benchtime 1x found.
type Survey struct {
	Stage string
	Names []string      // the leaf benchmarks the pattern selects
	Wall  time.Duration // the run's wall time: set-up plus one iteration of each
	Iter  time.Duration // the sum of their ns/op: one iteration of each
}

// SurveyStage runs o's benchmarks in stage once each.
func SurveyStage(ctx context.Context, run RunFunc, stage string, o Options) (Survey, error) {
	o.Benchtime, o.Count = "1x", 0
	start := time.Now()
	out, err := run(ctx, stage, o)
	if err != nil {
		return Survey{}, err
	}
	s := Survey{Stage: stage, Names: out.Names(), Wall: time.Since(start)}
	for _, r := range out.Results() {
		if ns, ok := r.Value("ns/op"); ok {
			s.Iter += time.Duration(ns)
		}
	}
	return s, nil
}

// Estimate guesses how long one run of the surveyed benchmarks takes at
// benchtime bt: the survey's own time, plus bt per benchmark for a
// duration (a b.Loop benchmark runs for about bt once; a b.N benchmark's
// ramp-up can take up to twice that, so the guess leans low), or N
// iterations of each for a count.
func (s Survey) Estimate(bt Benchtime) time.Duration {
	if bt.Count > 0 {
		return s.Wall + time.Duration(bt.Count-1)*s.Iter
	}
	return s.Wall + time.Duration(len(s.Names))*bt.Duration
}

// ETA estimates the time left in a run made of repeated steps (a stage's
// benchmarks, a canary): a step that ran before takes what it took last
// time; one that has not is guessed, and the guess scaled by how the
// guesses of the steps measured so far compared with their measurements.
type ETA struct {
	guess    map[string]time.Duration
	measured map[string]time.Duration
}

// NewETA starts an estimate from guesses per step.
func NewETA(guess map[string]time.Duration) *ETA {
	return &ETA{guess: guess, measured: map[string]time.Duration{}}
}

// Observe records how long a step took.
func (e *ETA) Observe(step string, d time.Duration) { e.measured[step] = d }

// Of estimates one step.
func (e *ETA) Of(step string) time.Duration {
	if d, ok := e.measured[step]; ok {
		return d
	}
	var guessed, took time.Duration
	for s, d := range e.measured {
		if g := e.guess[s]; g > 0 {
			guessed += g
			took += d
		}
	}
	g := e.guess[step]
	if guessed > 0 {
		return time.Duration(float64(g) * float64(took) / float64(guessed))
	}
	return g
}

// Left estimates the steps still to run, in any order, repeats included.
func (e *ETA) Left(steps []string) time.Duration {
	var total time.Duration
	for _, s := range steps {
		total += e.Of(s)
	}
	return total
}

// Approx renders a duration the way an estimate deserves: "40s", "4m30s",
// "12m", "1h25m".
func Approx(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(5*time.Second)/time.Second))
	case d < 10*time.Minute:
		d = d.Round(10 * time.Second)
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%02ds", m, s)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Round(time.Minute)/time.Minute))
	}
	d = d.Round(5 * time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
