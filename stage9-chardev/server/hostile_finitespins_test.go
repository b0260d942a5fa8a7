package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// Red-team finding F1: the hang bars (hangbars.go) judge a user by the
// resets under its commands, and the watchdog resets an engine under a
// SPIN only two limits after it began. A SPIN of one and a half limits
// ends first, with StatusOK: it is never reset, never counted, and its
// user never barred. A stranger with several channels on each engine runs
// such SPINs on all of them, round after round on the same channels; the
// scheduler gives each its turn, and a well-behaved client's command
// waits behind every one of them — seconds, for as long as the stranger
// likes.
//
// The preempt timeout (device/preempttimeout.go; softgpud's default
// 640 ms) closes it: once any other channel wants the engine — the
// stranger's own next channel, or a well-behaved client's — the engine
// asks the SPIN to give way, and resets under it when it has not within
// the timeout. The reset is counted against the stranger's context, and
// the daemon bars its uid, bans its contexts and hangs up its
// connections. So every probe must be live within liveBound from the
// start, and the stranger must be refused a second round.

func init() {
	strangerRoles["finite-spins"] = finiteSpinsRole
}

// finiteSpin is a SPIN of one and a half of softgpud's default watchdog
// limit: it would end before the watchdog's reset, which comes at two.
const finiteSpin = 3_000_000_000

// dialFiniteSpinner is dialSpinner with perEngine channels on each
// engine, all of one connection and context.
func dialFiniteSpinner(node string, perEngine int) (*spinner, string, error) {
	sp, call, err := dialSpinner(node)
	if err != nil {
		return nil, call, err
	}
	for range perEngine - 1 {
		for e := range uint32(abi.NumEngines) {
			if call, err := sp.openChannel(e); err != nil {
				sp.close()
				return nil, call, err
			}
		}
	}
	return sp, "", nil
}

// spinRound writes a SPIN of value cycles into the slot round places
// after each channel's first, rings each doorbell, and kicks the daemon,
// which wakes a sleeping engine.
func (sp *spinner) spinRound(round, value uint64) {
	for _, ch := range sp.chans {
		i := ch.head + round
		cmd := abi.Command{Op: abi.OpSpin, Ctx: sp.ctx, Value: value, Seq: i}
		cmd.Encode(ch.user[uapi.UserRingOffset+abi.SlotOffset(i, ch.mask):][:abi.CommandSize])
		word(ch.user, abi.RegDoorbell).Store(i + 1)
	}
	one := [8]byte{1}
	unix.Write(sp.kick, one[:])
}

// roundEnded returns each channel's status for round once all have
// completed it, and whether they have.
func (sp *spinner) roundEnded(round uint64) ([]abi.Status, bool) {
	var sts []abi.Status
	for _, ch := range sp.chans {
		i := ch.head + round
		w := uapi.StatusCompletionsOffset + 8*abi.CompletionWord(i, ch.mask)
		if !abi.Completed(word(ch.status, w+8*uapi.CompletionIndexWord).Load(), i) {
			return nil, false
		}
		sts = append(sts, abi.Status(word(ch.status, w+8*uapi.CompletionStatusWord).Load()))
	}
	return sts, true
}

// finiteSpinsRole: arg K. One connection and context with K channels on
// each engine; round after round on those same channels while the
// connection lasts, a finiteSpin on every channel, until all have ended
// or the connection is dropped; after a drop, a fresh connection. It
// prints "ready" once the first round spins, "round N: SPINs ended
// [...]" or "round N: its connection dropped" and then "round over" after
// each round, "its connection dropped" when it finds that between rounds,
// "refused: CALL errno=N" (once for a run of the same refusal) when it
// cannot dial, and "done" after the test's line.
func finiteSpinsRole(node, arg string) error {
	perEngine, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	var stop atomic.Bool
	go func() {
		waitLine()
		stop.Store(true)
	}()
	refused := ""
	var sp *spinner
	var round uint64 // the round on sp's channels
	for rounds := 0; !stop.Load(); {
		if sp == nil {
			var call string
			if sp, call, err = dialFiniteSpinner(node, perEngine); err != nil {
				if line := errnoLine(call, err); line != refused {
					fmt.Println("refused: " + line)
					refused = line
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			refused, round = "", 0
		} else if !sp.alive() { // hung up since its last round ended
			fmt.Println("its connection dropped")
			sp.close()
			sp = nil
			continue
		}
		sp.spinRound(round, finiteSpin)
		if rounds++; rounds == 1 {
			fmt.Println("ready")
		}
		dropped := false
		for i, end := 0, time.Now().Add(patience); time.Now().Before(end) && !stop.Load(); i++ {
			if sts, ok := sp.roundEnded(round); ok {
				fmt.Printf("round %d: SPINs ended %v\n", rounds, sts)
				break
			}
			if i%10 == 9 && !sp.alive() {
				fmt.Printf("round %d: its connection dropped\n", rounds)
				dropped = true
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Println("round over")
		round++
		if dropped {
			sp.close()
			sp = nil
		}
	}
	if sp != nil {
		sp.close()
	}
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset: a
// stranger runs SPINs of one and a half watchdog limits on three
// channels of each engine. Every probe of a well-behaved client is live
// within liveBound while it does; no round of the stranger's runs out
// with every SPIN ending in its own time (the engine is reset under one,
// at least, in each); and the stranger is refused (ErrBusy) when it dials
// again: its uid was barred. Without the preempt timeout each probe
// waited for the stranger's SPINs, three seconds each, every round ran
// out, and nothing was refused.
func TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	d := startDaemon(t) // softgpud's defaults: a 2 s watchdog, a 640 ms preempt timeout
	s := startStranger(t, "finite-spins", d.node, "3", cred)
	s.until(t, "ready")
	probes := 0
	for start := time.Now(); time.Since(start) < secondRound; probes++ {
		d.live(t, fmt.Sprintf("probe %d, %v into the stranger's SPINs", probes, time.Since(start).Round(time.Millisecond)))
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("%d probes; the stranger said %q (%d rounds)", probes, lines, roundsIn(lines))
	for _, line := range lines {
		if strings.Contains(line, "SPINs ended") && !strings.Contains(line, abi.StatusTimeout.String()) {
			t.Errorf("a round of the stranger's SPINs ended with none stopped: %q", line)
		}
	}
	refusedBusy := false
	for _, line := range lines {
		if strings.HasPrefix(line, "refused: ") && strings.HasSuffix(line, fmt.Sprintf("errno=%d", uint32(uapi.ErrBusy))) {
			refusedBusy = true
		}
	}
	assert.True(t, refusedBusy, "the stranger was not refused with ErrBusy (%d) after its SPINs kept others waiting: %q", uint32(uapi.ErrBusy), lines)
	d.live(t, "after the stranger")
	d.stop(t)
}
