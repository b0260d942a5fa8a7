package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"softgpu/stage9-chardev/abi"
)

// Red-team finding F1: the hang bars (hangbars.go) judge a user by the
// resets under its commands, and the watchdog resets an engine under a
// SPIN only two limits after it began. A SPIN of one and a half limits
// ends first, with StatusOK: the watchdog alone never resets it, never
// counts it, and never bars its user. A stranger with several channels
// on each engine runs such SPINs on all of them, round after round on the
// same channels; the scheduler gives each its turn (device/sched.go,
// choose), and a well-behaved client's command waits behind every one of
// them — seconds, for as long as the stranger likes.
//
// The preempt timeout (device/preempttimeout.go; softgpud's default
// 640 ms) is what stops it: once any other channel wants the engine — the
// stranger's own next channel, or a well-behaved client's — the engine
// asks the SPIN to give way, and resets under it when it has not within
// the timeout. The reset is counted against the stranger's context, and
// the daemon bars its uid, bans its contexts and hangs up its
// connections. So every probe must be live within liveBound from the
// start, no SPIN of the stranger's may run to its end, and the stranger
// must be refused a second round.

func init() {
	strangerRoles["finite-spins"] = finiteSpinsRole
}

// The attack's figures. finiteSpin is one and a half of softgpud's
// default watchdog limit: it would end before the watchdog's reset, which
// comes at two. A round of finitePerEngine of them would hold each engine
// 9 s, past liveBound and past secondRound, the time the test probes.
const (
	finiteSpin      = 3 * time.Second
	finitePerEngine = 3
)

// finiteSpinsRole: arg K. One connection and context with K channels on
// each engine; round after round on those same channels while the
// connection lasts, a finiteSpin on every channel, until all have ended
// or the connection is dropped; after a drop, or a round that did not
// end, a fresh connection. It prints "ready" once the first round spins;
// after each round "round N: SPINs ended [...]" — then "round N held an
// engine" if any of them ran to its end (StatusOK) — or "round N: its
// connection dropped", and then "round over"; "its connection dropped"
// when it finds that between rounds; "refused: CALL errno=N" (once for a
// run of the same refusal) when it cannot dial; and "done" after the
// test's line.
func finiteSpinsRole(node, arg string) error {
	perEngine, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	dial := func() (*spinner, string, error) {
		sp, call, err := dialAttached(node)
		if err != nil {
			return nil, call, err
		}
		for range perEngine {
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
	refused := ""
	var sp *spinner
	for rounds := 0; !stop.Load(); {
		if sp == nil {
			var call string
			if sp, call, err = dial(); err != nil {
				if line := errnoLine(call, err); line != refused {
					fmt.Println("refused: " + line)
					refused = line
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			refused = ""
		} else if !sp.alive() { // hung up since its last round ended
			fmt.Println("its connection dropped")
			sp.close()
			sp = nil
			continue
		}
		sp.spinFor(uint64(finiteSpin.Nanoseconds())) // cycles are nanoseconds
		if rounds++; rounds == 1 {
			fmt.Println("ready")
		}
		ended := false
		for i, end := 0, time.Now().Add(patience); time.Now().Before(end) && !stop.Load(); i++ {
			if sts, ok := sp.ended(); ok {
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
		fmt.Println("round over")
		if !ended {
			sp.close() // dropped, or still spinning: its slots are not known free
			sp = nil
		}
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
// stranger of another uid runs SPINs of one and a half watchdog limits
// on finitePerEngine channels of each engine, against softgpud's
// defaults. Every probe of a well-behaved client is live within liveBound
// from the stranger's first SPIN on — its first round is not excused, as
// the SPINs that never end are (hostile_spins_test.go), since somebody
// waits and the preempt timeout is far inside liveBound; no SPIN of the
// stranger's runs to its end, and every round that ends has one stopped;
// and the stranger is refused (ErrBusy) when it dials again: its uid was
// barred. Without the preempt timeout each probe waited for the
// stranger's SPINs, three seconds each, every round ran to its end, and
// nothing was refused.
func TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	d := startDaemon(t) // softgpud's defaults: a 2 s watchdog, a 640 ms preempt timeout
	s := startStranger(t, "finite-spins", d.node, strconv.Itoa(finitePerEngine), cred)
	s.until(t, "ready")
	probes := 0
	for start := time.Now(); time.Since(start) < secondRound; probes++ {
		d.live(t, fmt.Sprintf("probe %d, %v into the stranger's SPINs of %v, %d channels on each engine",
			probes, time.Since(start).Round(time.Millisecond), finiteSpin, finitePerEngine))
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("%d probes; the stranger said %q (%d rounds)", probes, lines, roundsIn(lines))
	assert.Empty(t, heldIn(lines), "rounds in which a stranger's SPIN of %v ran to its end, never reset; want none", finiteSpin)
	for _, line := range lines {
		if strings.Contains(line, "SPINs ended") && !strings.Contains(line, abi.StatusTimeout.String()) {
			t.Errorf("a round of the stranger's SPINs ended with none stopped: %q", line)
		}
	}
	assert.True(t, refusedBusyIn(lines), "the stranger was not refused with ErrBusy after its SPINs kept others waiting: %q", lines)
	d.live(t, "after the stranger")
	d.stop(t)
}
