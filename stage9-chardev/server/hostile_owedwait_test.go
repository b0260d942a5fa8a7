package server_test

// What a refused call costs while its uid owes (server/owed.go). A FREE
// behind queued work stays charged until the driver gives the memory
// back, and a call its quota refuses meanwhile has the driver reclaim
// what has passed before it is refused. A stranger that owes for minutes
// — it freed behind a queue of DELAYs, each legal — and refuses on many
// connections at once must not make each refusal cost the daemon more
// than the call itself: when every refusal of an owing uid polled the
// driver every millisecond for a tenth of a second, each refused call had
// the daemon scan everything deferred, under the driver's locks, tens of
// times.

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["owed-amp"] = owedAmp
}

// owedAmpPeriod is how often each of the stranger's looping connections
// asks: once a tenth of a second, as often as a call that waits owedWait
// can, so that the refused calls come as fast before the fix as after it
// and only what each costs differs.
const owedAmpPeriod = 100 * time.Millisecond

// owedAmp (arg: "N OWNER SECONDS") holds one connection and opens N
// more, all of one uid. The holder queues DELAYs on its channels
// (rtQueueDelays) and ALLOCs and FREEs 4 KiB behind them until its uid's
// quota refuses; when OWNER is "own", each of the N also frees 4 KiB
// behind DELAYs of its own. It prints "freed K" and "ready", and waits
// for its stdin line. Then the N connections ALLOC 4 KiB once every
// owedAmpPeriod each, for SECONDS, and it prints "refused R", "allocated
// A", a line for each other error, and "looped"; it holds until killed.
func owedAmp(node, arg string) error {
	var n, seconds int
	var owner string
	if _, err := fmt.Sscan(arg, &n, &owner, &seconds); err != nil {
		return err
	}
	holder, err := client.Dial(node)
	if err != nil {
		return err
	}
	if err := rtQueueDelays(holder, 100); err != nil {
		return err
	}
	// The loopers that are to owe take their page first, and queue
	// their DELAYs and free it last: a FREE waits for the engines to
	// drop the context's translations (driver: invalidate), which takes
	// longer the more channels keep them busy.
	loopers := make([]*client.GPU, n)
	kept := make([]client.Ptr, n)
	for i := range loopers {
		if loopers[i], err = client.Dial(node); err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		if owner == "own" {
			if kept[i], err = loopers[i].Alloc(4096); err != nil {
				return err
			}
		}
	}
	freed := 0
	for {
		p, err := holder.Alloc(4096)
		if err != nil {
			fmt.Println(errnoLine("refused", err))
			break
		}
		if err := holder.Free(p); err != nil {
			return err
		}
		freed++
	}
	if owner == "own" {
		for i, g := range loopers {
			if err := rtQueueDelays(g, 4); err != nil { // 6 s, past the loop even alone on the engines
				return err
			}
			if err := g.Free(kept[i]); err != nil {
				return err
			}
			freed++
		}
	}
	fmt.Printf("freed %d\n", freed)
	fmt.Println("ready")
	if err := waitLine(); err != nil {
		return err
	}

	var refused, allocated atomic.Int64
	var othersMu sync.Mutex
	var others []string
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for _, g := range loopers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				start := time.Now()
				p, err := g.Alloc(4096)
				switch {
				case err == nil:
					allocated.Add(1)
					g.Free(p)
				case errors.Is(err, uapi.ErrQuota):
					refused.Add(1)
				default:
					othersMu.Lock()
					others = append(others, errnoLine("ALLOC", err))
					othersMu.Unlock()
				}
				time.Sleep(time.Until(start.Add(owedAmpPeriod)))
			}
		}()
	}
	wg.Wait()
	fmt.Printf("refused %d\n", refused.Load())
	fmt.Printf("allocated %d\n", allocated.Load())
	for _, line := range others {
		fmt.Println(line)
	}
	fmt.Println("looped")
	select {}
}

// TestRefusedCallsOfAnOwingUidDoNotMultiplyReclaims: a stranger owes
// some nine hundred 4 KiB frees behind its queued DELAYs, which fill its
// uid's 4 MiB quota, and forty connections of its uid ask for 4 KiB ten
// times a second each for two seconds: all refused. The daemon must
// have its driver reclaim for them no more often than they are refused
// (settle's count, server.Settles) — in fact a few times a tenth of a
// second for the whole uid (owed.go, settleDue) — whether the
// connections owe nothing themselves (owner=uid: each refusal is final)
// or each freed behind DELAYs of its own (owner=own: each waits
// owedWait). A well-behaved client of another uid keeps its round trips
// meanwhile. On the code before the fix every refused call reclaimed
// about every millisecond for a tenth of a second.
func TestRefusedCallsOfAnOwingUidDoNotMultiplyReclaims(t *testing.T) {
	const loopers, seconds = 40, 2
	for _, owner := range []string{"uid", "own"} {
		t.Run("owner="+owner, func(t *testing.T) {
			cred, _ := strangerCred()
			s := serve(t, server.Config{
				Node:     filepath.Join(strangerDir(t), "card0"), // a stranger of another uid may reach it
				Mode:     0o666,
				Device:   device.Config{MemorySize: 16 << 20, ContextSize: 4 << 10}, // forty-one connections' save areas fit in the quota
				UidQuota: server.Quota{DeviceMemory: dqQuota},
			})
			st := startStranger(t, "owed-amp", s.Node(), fmt.Sprintf("%d %s %d", loopers, owner, seconds), cred)
			got := st.until(t, "ready")
			t.Logf("stranger: %q", got)
			require.Contains(t, got, errnoLine("refused", uapi.ErrQuota), "how the stranger's filling ended; want its uid's quota")
			require.Greater(t, freedBefore(t, got), 500, "4 KiB frees the stranger's uid owes")

			before := s.Settles()
			_, err := fmt.Fprintln(st.stdin, "go")
			require.NoError(t, err)
			if cred != nil { // the victim must be of another uid, or the stranger's quota refuses it too
				w := dialWellBehaved(t, s.Node())
				for i := range seconds * 10 {
					w.roundTrip(t, "while the stranger's refused calls loop", byte(i+1))
					time.Sleep(owedAmpPeriod)
				}
			}
			looped := st.until(t, "looped")
			settles := s.Settles() - before
			t.Logf("stranger: %q; the daemon reclaimed %d times for owed charges", looped, settles)
			var refused, allocated int
			require.GreaterOrEqual(t, len(looped), 2, "the stranger's report")
			_, err = fmt.Sscanf(looped[0], "refused %d", &refused)
			require.NoError(t, err, "the stranger's %q", looped[0])
			_, err = fmt.Sscanf(looped[1], "allocated %d", &allocated)
			require.NoError(t, err, "the stranger's %q", looped[1])
			assert.Len(t, looped, 2, "the stranger's calls failed otherwise than by its quota")
			assert.Zero(t, allocated, "4 KiB ALLOCs granted to a uid at its quota, its frees still behind its DELAYs")
			require.Greater(t, refused, loopers*seconds, "the stranger's refused calls")
			assert.LessOrEqual(t, settles, uint64(refused), "the daemon's reclaims for %d refused calls of an owing uid; want at most one a call", refused)
			st.kill()
		})
	}
}
