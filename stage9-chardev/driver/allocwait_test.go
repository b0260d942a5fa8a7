package driver

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestAllocTakesAnyRetiredFree: with device memory full, an Alloc waits
// for a deferred free — and must take the first to pass, not wait for the
// one at the head of the deferred list. Frees need not pass in the order
// they join it: two Frees overlap, the first (held in the Deferring hook)
// notes its marks before an endless DELAY is queued on the copy engine,
// the second after, and the second joins the list first. The head then
// passes only at Close; the first's memory passes once a DELAY on the
// compute engine, queued before its marks, has run ("retires during the
// wait"), or has passed already and joins the list while Alloc waits
// ("joins during the wait"). An Alloc that waits for the head alone waits
// retireWait, and fails with ErrOutOfMemory.
//
// Nothing here turns on timing: the wait's Retiring hook, called once
// Alloc has copied what it waits on, waits out the DELAY or lets the
// first Free go and sees it return, so the first's memory has passed or
// joined by Alloc's first look at what it waits for — even if the hook
// took longer than retireWait: the wait looks at what it waits for before
// it looks at its deadline (spinBounded, bound.go).
func TestAllocTakesAnyRetiredFree(t *testing.T) {
	const size = 64 << 10
	tests := []struct {
		name string
		// before is queued on the compute engine before the first free's
		// marks: what its memory waits for.
		before []abi.Command
		// joinLate lets the first free append only once Alloc is waiting.
		joinLate bool
	}{
		// Long enough that Alloc finds the DELAY still running, and
		// waits: the Retiring hook then waits it out, however long the
		// machine takes. An Alloc that looks only after the DELAY has
		// ended finds the memory passed, and does not wait; the case then
		// tested nothing, and says so.
		{"retires during the wait", []abi.Command{{Op: abi.OpDelay, Value: 500_000_000}}, false}, // 500 ms
		{"joins during the wait", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openWith(t, device.Config{MemorySize: 4 << 20}, Config{})
			// The hooks act once each, for the first Free and the Alloc
			// armed below. Retiring runs on Alloc's goroutine, before
			// Alloc sends its result: what it stores, the test reads after
			// the receive.
			var (
				holdPA        atomic.Uint64 // the memory whose Free to hold; 0 for none
				reached       = make(chan struct{})
				release       = make(chan struct{})
				armed, waited atomic.Bool
				before        *Pending
				firstFreed    = make(chan error, 1)
				firstErr      error
			)
			d.SetHooks(Hooks{
				Deferring: func(pa uint64) {
					if pa != 0 && holdPA.CompareAndSwap(pa, 0) {
						close(reached)
						<-release
					}
				},
				Retiring: func() {
					if !armed.CompareAndSwap(true, false) {
						return
					}
					waited.Store(true)
					if tt.joinLate {
						close(release)
						firstErr = <-firstFreed
					} else {
						before.Wait()
					}
				},
			})

			var allocs []uint64
			for {
				addr, err := d.Alloc(size)
				if errors.Is(err, ErrOutOfMemory) {
					break
				}
				require.NoError(t, err, "Alloc %d", len(allocs))
				allocs = append(allocs, addr)
			}
			require.GreaterOrEqual(t, len(allocs), 2, "allocations of %d bytes the device held", size)
			first, head := allocs[0], allocs[1]

			var err error
			if tt.before != nil {
				before, err = d.SubmitBatch(abi.EngineCompute, tt.before)
				require.NoError(t, err)
			}
			holdPA.Store(first)
			go func() { firstFreed <- d.Free(first) }()
			<-reached // the first free's marks are taken
			endless, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
			require.NoError(t, err)
			require.NoError(t, d.Free(head), "Free of the memory freed behind the endless DELAY")
			if !tt.joinLate {
				close(release)
				require.NoError(t, <-firstFreed, "Free of the memory freed before the endless DELAY")
			}

			type result struct {
				addr uint64
				err  error
			}
			allocated := make(chan result, 1)
			armed.Store(true)
			go func() {
				addr, err := d.Alloc(size)
				allocated <- result{addr, err}
			}()
			var got result
			select {
			case got = <-allocated:
			case <-time.After(10 * time.Second): // the endless DELAY runs until Close: no wait for it ends sooner
				t.Errorf("Alloc with device memory full still waiting after 10 s, though the Free of %#x had passed: it waits for the Free of %#x, behind the endless DELAY", first, head)
				require.NoError(t, d.Close())
				got = <-allocated
			}
			if tt.joinLate {
				require.NoError(t, firstErr, "Free of the memory freed before the endless DELAY")
			}
			require.NoError(t, got.err, "Alloc with device memory full and the Free of %#x passed", first)
			if got.addr != first {
				t.Errorf("Alloc(%d) = %#x; want %#x, the memory whose Free passed (%#x waits for the endless DELAY)", size, got.addr, first, head)
			}
			require.NoError(t, d.Close())
			if err := endless.Wait(); !errors.Is(err, abi.StatusAborted) && !errors.Is(err, ErrClosed) {
				t.Errorf("the endless DELAY after Close = %v; want StatusAborted or ErrClosed", err)
			}
			if !waited.Load() {
				t.Skip("Alloc looked only after the DELAY had ended, and did not wait: nothing was tested (a loaded machine)")
			}
		})
	}
}
