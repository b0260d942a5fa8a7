package driver

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/internal/leakcheck"
)

// unregisterGate is a device whose UnregisterHost, for the one region the
// test names, waits until the test lets it go: it holds that region's
// HostFree after it has taken its channel marks and before its entry
// joins the retiring list, as a slow unmap would.
type unregisterGate struct {
	Hardware
	target  atomic.Uint64 // the host address of the region to hold; 0 for none
	reached chan struct{} // closed when the held call arrives
	release chan struct{} // closed by the test to let it go on
}

func (g *unregisterGate) UnregisterHost(mem []byte) error {
	if len(mem) > 0 && g.target.CompareAndSwap(addressOf(mem), 0) {
		close(g.reached)
		<-g.release
	}
	return g.Hardware.UnregisterHost(mem)
}

// TestRegisterTakesAnyRetiredEntry: with every window entry taken, a
// HostAlloc waits for a retiring entry — and must take the first to
// retire, not wait for the one at the head of the retiring list. Entries
// need not retire in the order they join it: two HostFrees overlap, the
// first (held in UnregisterHost) takes its marks before an endless DELAY
// is queued on the copy engine, the second after, and the second joins
// the list first. The head then retires only at Close; the first's entry
// retires once a DELAY on the compute engine, queued before its marks,
// has run ("retires during the wait"), or has retired already and joins
// the list while HostAlloc waits ("joins during the wait"). A HostAlloc
// that waits for the head alone waits retireWait, and fails with
// ErrNoWindow.
//
// Nothing here turns on timing: the wait's Retiring hook, called once
// HostAlloc has copied the list it waits on, waits out the DELAY or lets
// the first HostFree go and sees it return, so the first's entry has
// retired or joined by HostAlloc's first look at what it waits for —
// even if the hook took longer than retireWait: the wait looks at what
// it waits for before it looks at its deadline (spinBounded, bound.go).
func TestRegisterTakesAnyRetiredEntry(t *testing.T) {
	tests := []struct {
		name string
		// before is queued on the compute engine before the first free's
		// marks: what its entry waits for.
		before []abi.Command
		// joinLate lets the first free append only once HostAlloc is
		// waiting.
		joinLate bool
	}{
		// Long enough that HostAlloc finds the DELAY still running, and
		// waits: the Retiring hook then waits it out, however long the
		// machine takes. A HostAlloc that looks only after the DELAY has
		// ended finds the entry retired, and does not wait; the case then
		// tested nothing, and says so.
		{"retires during the wait", []abi.Command{{Op: abi.OpDelay, Value: 500_000_000}}, false}, // 500 ms
		{"joins during the wait", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			dev, err := device.Open(device.Config{MemorySize: 4 << 20})
			require.NoError(t, err)
			gate := &unregisterGate{Hardware: dev, reached: make(chan struct{}), release: make(chan struct{})}
			d, err := New(gate, Config{})
			if err != nil {
				dev.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			// The hook acts once, for the HostAlloc armed below. It runs on
			// HostAlloc's goroutine, before HostAlloc sends its result:
			// what it stores, the test reads after the receive.
			var (
				armed, waited atomic.Bool
				before        *Pending
				firstFreed    = make(chan error, 1)
				firstErr      error
			)
			d.SetHooks(Hooks{Retiring: func() {
				if !armed.CompareAndSwap(true, false) {
					return
				}
				waited.Store(true)
				if tt.joinLate {
					close(gate.release)
					firstErr = <-firstFreed
				} else {
					before.Wait()
				}
			}})

			var regions []*Pinned
			for len(regions) <= abi.WindowSlots { // the bounce ring may hold entries too
				p, err := d.HostAlloc(4096)
				if errors.Is(err, ErrNoWindow) {
					break
				}
				require.NoError(t, err, "HostAlloc %d", len(regions))
				regions = append(regions, p)
			}
			require.GreaterOrEqual(t, len(regions), 2, "window entries HostAlloc could take")
			first, head := regions[0], regions[1]

			if tt.before != nil {
				before, err = d.SubmitBatch(abi.EngineCompute, tt.before)
				require.NoError(t, err)
			}
			gate.target.Store(addressOf(first.Bytes()))
			go func() { firstFreed <- d.HostFree(first) }()
			<-gate.reached // the first free's marks are taken
			endless, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
			require.NoError(t, err)
			require.NoError(t, d.HostFree(head), "HostFree of the region freed behind the endless DELAY")
			if !tt.joinLate {
				close(gate.release)
				require.NoError(t, <-firstFreed, "HostFree of the region freed before the endless DELAY")
			}

			type result struct {
				p   *Pinned
				err error
			}
			allocated := make(chan result, 1)
			armed.Store(true)
			go func() {
				p, err := d.HostAlloc(4096)
				allocated <- result{p, err}
			}()
			var got result
			select {
			case got = <-allocated:
			case <-time.After(10 * time.Second): // the endless DELAY runs until Close: no wait for it ends sooner
				t.Errorf("HostAlloc with the window full still waiting after 10 s, though entry %d had retired: it waits for entry %d, behind the endless DELAY", first.slot, head.slot)
				require.NoError(t, d.Close())
				got = <-allocated
			}
			if tt.joinLate {
				require.NoError(t, firstErr, "HostFree of the region freed before the endless DELAY")
			}
			require.NoError(t, got.err, "HostAlloc with the window full and entry %d retired", first.slot)
			if got.p.slot != first.slot {
				t.Errorf("HostAlloc took entry %d; want %d, the one that retired (%d waits for the endless DELAY)", got.p.slot, first.slot, head.slot)
			}
			require.NoError(t, d.Close())
			if err := endless.Wait(); !errors.Is(err, abi.StatusAborted) && !errors.Is(err, ErrClosed) {
				t.Errorf("the endless DELAY after Close = %v; want StatusAborted or ErrClosed", err)
			}
			for _, p := range append(regions[2:], got.p) {
				require.NoError(t, d.HostFree(p))
			}
			if !waited.Load() {
				t.Skip("HostAlloc looked only after the DELAY had ended, and did not wait: nothing was tested (a loaded machine)")
			}
		})
	}
}
