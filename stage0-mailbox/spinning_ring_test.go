package softgpu_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"softgpu/stage0-mailbox/internal/spin"
)

// A stage's round trip is not the bare handoff's two loops alone. Its
// host's wait and its engine's pollLoop yield on spin's cadence in time,
// and in stages 0 to 4 a third loop polls beside them: the idle compute
// engine, polling a doorbell no one rings — on the cadence for its first
// spin.GiveWayAfter, and yielding after every poll from then on. Three
// spinners on two cores take turns through the Go scheduler's run queue,
// and while the third holds a P, one side of the round trip is off its
// core until a loop that holds one yields. spinningHandoff is the handoff
// run that way, with no stage's code in it, so that what the third loop
// costs can be measured apart from what any mechanism costs: the floor
// under a round trip beside a spinning idle engine, which Baseline/handoff
// is not.

// idler is what spins beside a spinningHandoff's two loops.
type idler int

const (
	noIdler      idler = iota // nothing: the two loops alone, on spin's cadence
	cadenceIdler              // a loop yielding on spin's cadence, as stages 0 to 4's idle engine did before it gave way (spin.GiveWayAfter)
	eagerIdler                // a loop that yields after every empty poll
)

// spinningHandoff is the three-line ring of handoff, its host and engine
// loops yielding as a stage's do, with an idler beside them.
type spinningHandoff struct {
	handoffLines
	idleBell paddedWord     // the idler's doorbell: no command ever comes; stop writes it
	loops    sync.WaitGroup // the engine loop and the idler
}

// startSpinningHandoff starts the engine loop and, unless third is
// noIdler, the idler.
func startSpinningHandoff(third idler) *spinningHandoff {
	h := &spinningHandoff{}
	h.loops.Add(1)
	go func() {
		defer h.loops.Done()
		var seen uint64
		yield := spin.NewCadence(0)
		// Counted as pollLoop counts: from 1, and from 1 again after work.
		for polls := 1; ; polls++ {
			n := h.doorbell.v.Load() // pairs with post's store (see serve)
			if n == ^uint64(0) {
				return
			}
			if n != seen {
				seen = n
				h.serve(n)
				polls = 0
				continue
			}
			if yield.Due(polls) {
				runtime.Gosched()
			}
		}
	}()
	if third == noIdler {
		return h
	}
	every := 0 // spin's cadence in time, as the stages' loops yield
	if third == eagerIdler {
		every = 1 // a count of one: after every empty poll
	}
	h.loops.Add(1)
	go func() {
		defer h.loops.Done()
		yield := spin.NewCadence(every)
		for polls := 1; h.idleBell.v.Load() == 0; polls++ {
			if yield.Due(polls) {
				runtime.Gosched()
			}
		}
	}()
	return h
}

// roundTrip is handoff's, with the host's wait yielding as a channel's
// wait does: on a cadence of its own, begun with the wait.
func (h *spinningHandoff) roundTrip() {
	n := h.post()
	yield := spin.NewCadence(0)
	// This load pairs with the engine's store of the completion.
	for polls := 1; h.completion.n.Load() != n; polls++ {
		if yield.Due(polls) {
			runtime.Gosched()
		}
	}
	h.completion.check(n, "spinning handoff")
}

// stop ends both loops and waits for them.
func (h *spinningHandoff) stop() {
	h.doorbell.v.Store(^uint64(0))
	h.idleBell.v.Store(1)
	h.loops.Wait()
}

// TestSpinningHandoffRunsAndStops checks the ring before a benchmark reads
// a floor from it: with each idler, round trips complete one after another
// (roundTrip panics on a completion without its status), and stop ends
// every loop, the idler's too, which nothing but stop ever tells to end.
func TestSpinningHandoffRunsAndStops(t *testing.T) {
	for _, c := range []struct {
		name  string
		third idler
	}{{"alone", noIdler}, {"cadence", cadenceIdler}, {"eager", eagerIdler}} {
		t.Run(c.name, func(t *testing.T) {
			h := startSpinningHandoff(c.third)
			const n = 10000
			for range n {
				h.roundTrip()
			}
			require.Equal(t, uint64(n), h.completion.n.Load())
			stopped := make(chan struct{})
			go func() {
				h.stop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("stop did not end the ring's loops in 10 s")
			}
		})
	}
}
