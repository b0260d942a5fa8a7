package record

import (
	"fmt"
	"time"
)

// estimator guesses the time left in a run from the durations measured so
// far: the last run of each stage and of the canary. A stage not yet run is
// guessed at the mean of those that have.
type estimator struct {
	stages []string
	stage  map[string]time.Duration
	canary time.Duration
}

func newEstimator(stages []string) *estimator {
	return &estimator{stages: stages, stage: map[string]time.Duration{}}
}

// left estimates the time for the stages still to run in this pass
// (current included), the canary after it, and passesAfter full passes.
func (e *estimator) left(current []string, passesAfter int) string {
	if len(e.stage) == 0 {
		return "time left unknown until the first stage finishes"
	}
	var total time.Duration
	for _, d := range e.stage {
		total += d
	}
	mean := total / time.Duration(len(e.stage))
	guess := func(stage string) time.Duration {
		if d, ok := e.stage[stage]; ok {
			return d
		}
		return mean
	}
	var pass time.Duration
	for _, s := range e.stages {
		pass += guess(s)
	}
	var rest time.Duration
	for _, s := range current {
		rest += guess(s)
	}
	rest += e.canary + time.Duration(passesAfter)*(pass+2*e.canary)
	return fmt.Sprintf("about %s left", rest.Round(time.Second))
}
