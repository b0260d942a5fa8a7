package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/server"
)

// TestEveryResetIsJudgedOnce: the daemon looks for a reset under a
// client's context at every Notify of its channels — on the interrupt
// thread, for a fault — and again on the client's serve goroutine once a
// closed channel has left its runlist (closeChannel), and neither look
// takes a lock (driver.Context.Resets; red-team finding F7). Rounds of
// SPINs, each on a fresh connection and context, one per engine, are
// reset by the watchdog, and each connection hangs up as soon as its
// SPIN's completion is written — before, or as, the engine counts the
// reset — so that its close's look races the interrupt's. Around them
// other clients come and go, their contexts taking the ids the SPINs'
// left; they run fenced work on both engines, and DELAYs past the
// watchdog's limit, which it stops at a preemption point — a fault and a
// Notify, and no reset — unless other channels' NOPs preempted them
// first, each run then starting the limit afresh. Every reset must be struck exactly once, against the context
// it was counted in, and nothing else: no look may miss one, strike one
// twice, or find one in a later context of the same id.
//
// The test's clients are the daemon's own user, which is never barred,
// so each strike is only logged, with its context (strikeHang): the log
// is the count.
func TestEveryResetIsJudgedOnce(t *testing.T) {
	const (
		limit  = 100 * time.Millisecond // the watchdog: a SPIN holds its engine two limits
		rounds = 6
		others = 3
	)
	var log syncLog
	s := serve(t, server.Config{Driver: driver.Config{Watchdog: uint64(limit.Nanoseconds())},
		Log: slog.New(slog.NewJSONHandler(&log, nil))})

	stop := make(chan struct{})
	errs := make(chan error, others)
	var wg sync.WaitGroup
	for range others {
		wg.Go(func() { errs <- comeAndGo(s.Node(), limit, stop) })
	}

	spun := map[abi.Context]int{} // SPINs reset under each context id, over its owners
	for round := range rounds {
		type spinning struct {
			r    *rawConn
			ch   *rawChannel
			spin uint64
		}
		var spins []spinning
		for e := range abi.Engine(abi.NumEngines) {
			r := dialRaw(t, s.Node())
			r.attach()
			ch := r.openChannel(e)
			spin := ch.put(abi.Command{Op: abi.OpSpin, Ctx: r.ctx, Value: 1 << 62})
			ch.ring(ch.next)
			spins = append(spins, spinning{r, ch, spin})
		}
		for _, sp := range spins {
			require.Equal(t, abi.StatusTimeout, sp.ch.wait(sp.spin), "round %d: the SPIN of context %d", round, sp.r.ctx)
			sp.r.sock.Close() // at once: the reset is counted after the completion is written (device/engine.go)
			spun[sp.r.ctx]++
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a client coming and going around the SPINs")
	}
	require.NoError(t, s.Close()) // every client torn down: every look made

	struck := map[abi.Context]int{}
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	for sc.Scan() {
		var rec struct {
			Msg     string
			Context abi.Context
			Resets  uint64
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "the daemon's log line %q", sc.Text())
		if !strings.HasPrefix(rec.Msg, "a reset under a command of root's") {
			continue
		}
		struck[rec.Context]++
		assert.Equal(t, uint64(1), rec.Resets, "a strike of context %d: the resets it found (one SPIN each)", rec.Context)
	}
	assert.Equal(t, spun, struck, "strikes per context id; want one per SPIN reset under it")
}

// comeAndGo dials, runs NOPs on both engines and every third time a
// DELAY of three watchdog limits, which the watchdog stops at a
// preemption point (a channel fault, no reset) if no other channel's
// command preempts it first, and hangs up; again and again until stop is
// closed.
func comeAndGo(node string, limit time.Duration, stop <-chan struct{}) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		g, err := client.Dial(node)
		if err != nil {
			return fmt.Errorf("Dial %d: %w", i, err)
		}
		for n := range 4 {
			for _, e := range []client.Engine{client.Copy, client.Compute} {
				if err := g.Nop(e); err != nil {
					g.Close()
					return fmt.Errorf("client %d: NOP %d on %v: %w", i, n, e, err)
				}
			}
		}
		if i%3 == 2 {
			if err := g.Delay(client.Compute, uint64(3*limit.Nanoseconds())); err != nil && !errors.Is(err, abi.StatusTimeout) {
				g.Close()
				return fmt.Errorf("client %d: a DELAY of three watchdog limits = %v; want StatusTimeout, or nil if it was preempted on the way", i, err)
			}
		}
		g.Close()
	}
}
