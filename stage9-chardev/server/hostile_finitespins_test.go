package server_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"softgpu/stage9-chardev/abi"
)

// Red-team review of 694a060, F1: a SPIN that ends before the reset.
//
// The rule (hangbars.go, and the chapter's "a user whose command hangs an
// engine is barred for a while"): a uid can hold the engines with
// commands that never reach a preemption point about once per bar; after
// the first round, a well-behaved client is live within liveBound again.
//
// The hole: only a reset is judged. The watchdog asks a command to stop
// one limit after it began and resets the engine a limit later
// (device/watchdog.go); a SPIN ignores the request, so one of 1.5 limits
// holds its engine past the request and then ends StatusOK, before the
// reset. Nothing counts it in RegCtxResets, no fault, no Notify, no
// strike. A stranger with several channels on each engine rings such a
// SPIN on every one, round after round on the same channels: the engines
// serve the channels in turn (device/sched.go, choose), so a victim's
// command waits for up to all of them, several times liveBound, for as
// long as the stranger likes.
//
// What a fix must make true: after the stranger's first round no SPIN of
// its runs to its end again (the uid barred and hung up, or the SPIN
// refused), and a well-behaved client's life on the daemon stays within
// liveBound meanwhile.

func init() {
	strangerRoles["finite-spins"] = finiteSpinsRole
}

// The attack's figures. The daemon runs with a short watchdog to keep
// the test short; a SPIN of 1.5 limits passes the preemption request (at
// one limit) and ends before the reset (at two), and a round of
// finitePerEngine of them holds each engine finiteRound, more than twice
// liveBound.
const (
	finiteLimit     = 500 * time.Millisecond
	finiteSpin      = finiteLimit * 3 / 2
	finitePerEngine = 6
	finiteRound     = finitePerEngine * finiteSpin
)

// finiteSpinsRole: with arg "K:CYCLES", one connection with K channels on
// each engine; round after round on those same channels, a SPIN of
// CYCLES on every one, and a wait until all have ended. It prints "ready"
// once the first round is spinning; after each round "round N: SPINs
// ended [...]", then "round N held an engine" if any of them ran to its
// end (StatusOK), then "round over". A connection the daemon drops is
// dialled again, and "refused: CALL errno=N" said (once for a run of the
// same refusal) while it cannot be. It stops at the test's line: "done".
func finiteSpinsRole(node, arg string) error {
	var k int
	var cycles uint64
	if _, err := fmt.Sscanf(arg, "%d:%d", &k, &cycles); err != nil {
		return fmt.Errorf("arg %q: %w", arg, err)
	}
	dial := func() (*spinner, string, error) {
		sp, call, err := dialAttached(node)
		if err != nil {
			return nil, call, err
		}
		for range k {
			for e := range uint32(abi.NumEngines) {
				if call, err := sp.open(e); err != nil {
					sp.close()
					return nil, call, err
				}
			}
		}
		return sp, "", nil
	}
	var stop atomic.Bool
	go func() {
		waitLine()
		stop.Store(true)
	}()
	sp, call, err := dial()
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	refused := ""
	for rounds := 0; !stop.Load(); {
		if sp == nil {
			if sp, call, err = dial(); err != nil {
				if line := errnoLine(call, err); line != refused {
					fmt.Println("refused: " + line)
					refused = line
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			refused = ""
		}
		sp.spinFor(cycles)
		if rounds++; rounds == 1 {
			fmt.Println("ready")
		}
		ended := false
		for i, end := 0, time.Now().Add(patience); !ended && time.Now().Before(end) && !stop.Load(); i++ {
			sts, ok := sp.ended()
			if ok {
				fmt.Printf("round %d: SPINs ended %v\n", rounds, sts)
				for _, st := range sts {
					if st == abi.StatusOK {
						fmt.Printf("round %d held an engine\n", rounds)
						break
					}
				}
				for c := range sp.chans {
					sp.chans[c].head++ // the next round on the next slot
				}
				ended = true
				break
			}
			if i%10 == 9 && !sp.alive() {
				fmt.Printf("round %d: its connection dropped\n", rounds)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !ended && !stop.Load() {
			sp.close()
			sp = nil
		}
		fmt.Println("round over")
	}
	if sp != nil {
		sp.close()
	}
	fmt.Println("done")
	return nil
}

// heldIn lists the rounds a finite-spins stranger said held an engine.
func heldIn(lines []string) []string {
	var held []string
	for _, line := range lines {
		if strings.HasSuffix(line, " held an engine") {
			held = append(held, strings.TrimSuffix(line, " held an engine"))
		}
	}
	return held
}

// TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset: a
// stranger of another uid keeps finitePerEngine channels on each engine
// busy with SPINs of 1.5 watchdog limits, which end before the reset and
// so are never judged. Its first round is let run, as for the SPINs that
// never end (hostile_spins_test.go); then, for two rounds' length, every
// well-behaved probe must be live within liveBound, and the stranger must
// have run no further SPIN to its end.
func TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	d := startDaemon(t, "-watchdog", finiteLimit.String())
	s := startStranger(t, "finite-spins", d.node, fmt.Sprintf("%d:%d", finitePerEngine, finiteSpin.Nanoseconds()), cred)
	s.until(t, "ready")
	first := s.until(t, "round over") // finiteRound: what the first round may take, as for SPINs that never end
	t.Logf("the first round: %q", first)
	probes := 0
	for start := time.Now(); time.Since(start) < 2*finiteRound; probes++ {
		d.live(t, fmt.Sprintf("probe %d, %v after the stranger's first round of SPINs of %v (watchdog %v), %d channels on each engine",
			probes, time.Since(start).Round(time.Millisecond), finiteSpin, finiteLimit, finitePerEngine))
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("%d probes; then the stranger said %q", probes, lines)
	assert.Empty(t, heldIn(lines), "rounds after its first in which a stranger's SPIN of %v ran to its end, past the watchdog's preemption request (%v) and never reset; want none", finiteSpin, finiteLimit)
	d.live(t, "after the stranger")
	d.stop(t)
}
