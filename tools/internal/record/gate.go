// Package record measures stages for the book: it runs each chosen stage's
// benchmarks in several passes, gates every pass on a canary, and reduces
// the accepted passes to a records.Record (best pass and median per row)
// and a benchstat-format text beside it.
//
// The flow of one run (Measure):
//
//	for accepted passes < wanted:
//	    canary (Baseline/pingpong, median of a few runs)
//	    every stage's benchmarks, in alternating order
//	    canary again
//	    judge every pass so far against the best canary seen (Gate)
//
// Why a canary: the machine drifts (MACHINE.md: a round trip lands in one of
// three clusters 2× to 8× apart, and moves within seconds). A pass measured
// while the canary was slow measured the machine, not the stage, so it is
// thrown away and run again, up to a limit.
package record

import (
	"math"

	"softgpu/tools/internal/records"
)

// Worst is the slower of a pass's two canaries: the pass is only as
// trustworthy as its worst moment.
func Worst(c records.Canary) float64 {
	return math.Max(c.Before, c.After)
}

// BestCanary is the fastest canary measurement seen over all attempts,
// accepted or not; 0 if there is none.
func BestCanary(canaries []records.Canary) float64 {
	best := 0.0
	for _, c := range canaries {
		for _, v := range []float64{c.Before, c.After} {
			if v > 0 && (best == 0 || v < best) {
				best = v
			}
		}
	}
	return best
}

// Gate reports, for each attempt, whether it passes the canary gate: its
// worst canary is at most best × (1 + threshold), where best is the fastest
// canary seen in the whole run. An attempt accepted early can be rejected
// later, when a faster canary shows the machine was slow all along.
func Gate(canaries []records.Canary, threshold float64) []bool {
	best := BestCanary(canaries)
	ok := make([]bool, len(canaries))
	for i, c := range canaries {
		ok[i] = Worst(c) <= best*(1+threshold)
	}
	return ok
}
