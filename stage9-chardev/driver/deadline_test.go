package driver

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of the driver's deadlines on the engines (bound.go): for each
// wait on an engine's answer — a TLB invalidation's ack, a window entry's
// DMA holds, a runlist's ack, the device stopping — an engine is made to
// stop answering (the device's Resolved hook holds its goroutine in the
// middle of a command, a translation or a DMA hold in hand), and the call
// must return an error wrapping ErrTimeout within its bound, while the
// other engine keeps working, and Close completes once the engine is let go.

// mustReturnWithin is how long a test gives a call that must hit its
// deadline: the longest bound (engineBound, with no watchdog set) and
// wide room for a loaded machine. A call still waiting then is one that
// waits without a deadline.
const mustReturnWithin = 10 * time.Second

// wedged is an engine held in the middle of a command by the device's
// Resolved hook: it answers nothing until release.
type wedged struct {
	stuck   chan struct{} // closed once the engine is held
	release func()        // lets it go; called again, does nothing
}

// wedge makes engine e stop answering at the first run it resolves from
// now on: its goroutine waits in the hook, holding the run's translation
// (and the window entry, for a bus run), until the returned release — or
// the test's end, before the driver and device close.
func wedge(t *testing.T, d *Driver, e abi.Engine) *wedged {
	t.Helper()
	w := &wedged{stuck: make(chan struct{})}
	let := make(chan struct{})
	var once, held sync.Once
	w.release = func() { once.Do(func() { close(let) }) }
	t.Cleanup(w.release) // before the driver's Close (cleanups run last first)
	d.hw.(*device.Device).SetHooks(device.Hooks{Resolved: func(eng abi.Engine, va uint64, write bool) {
		if eng != e {
			return
		}
		held.Do(func() {
			close(w.stuck)
			<-let
		})
	}})
	return w
}

// within runs f and returns its error, failing the test if f has not
// returned within mustReturnWithin; it reports how long f took.
func within(t *testing.T, what string, f func() error) (error, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(mustReturnWithin):
		t.Fatalf("%s did not return within %v: a wait on an unanswering engine has no deadline", what, mustReturnWithin)
		return nil, 0
	}
}

// openWedgeable opens a driver whose device the test may hook, with
// spinning engines (an idle engine is never asleep, so no wait is
// answered by a sleep).
func openWedgeable(t *testing.T) *Driver {
	t.Helper()
	return openWith(t, device.Config{MemorySize: 16 << 20}, Config{Idle: Idle{Mode: IdleSpin}})
}

// stickCopy starts a COPY in context c on the copy engine, wedged at its
// first run, and returns its batch once the engine is held.
func stickCopy(t *testing.T, d *Driver, c *Context, src, dst uint64) (*wedged, *Pending) {
	t.Helper()
	w := wedge(t, d, abi.EngineCopy)
	p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpCopy, Ctx: c.ID(), Src: src, Dst: dst, Size: 4096}})
	require.NoError(t, err)
	select {
	case <-w.stuck:
	case <-time.After(mustReturnWithin):
		t.Fatal("the copy engine never resolved the COPY's first run")
	}
	return w, p
}

// otherEngineWorks checks that the compute engine still runs commands of
// context c while the copy engine is wedged.
func otherEngineWorks(t *testing.T, d *Driver, c *Context, va uint64) {
	t.Helper()
	err, _ := within(t, "a FILL on the compute engine", func() error {
		return in(d, c, abi.EngineCompute, abi.Command{Op: abi.OpFill, Dst: va, Size: 4096, Value: 0x5a})
	})
	require.NoError(t, err, "FILL on the compute engine beside a wedged copy engine")
}

// TestUnmapHasADeadline: with the copy engine held inside a COPY (a
// translation in hand, so it cannot acknowledge), Unmap returns ErrTimeout
// within its bound instead of spinning for ever; the frames it unmapped are
// not given back (the engine may still use them), the compute engine keeps
// working, and once the engine is let go a later Unmap succeeds.
func TestUnmapHasADeadline(t *testing.T) {
	d := openWedgeable(t)
	c := newContext(t, d)
	src, _ := c.Alloc(4096, abi.Page4K)
	dst, _ := c.Alloc(4096, abi.Page4K)
	victim, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	other, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	second, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	w, p := stickCopy(t, d, c, src, dst)
	inUse := d.MemoryInUse()
	err, took := within(t, "Unmap beside a wedged engine", func() error { return c.Unmap(victim) })
	require.ErrorIs(t, err, ErrTimeout, "Unmap beside an engine that never acknowledges")
	t.Logf("Unmap returned after %v: %v", took, err)
	require.Equal(t, inUse, d.MemoryInUse(), "MemoryInUse after the timed-out Unmap: the frames must stay out of reuse until the engine answers")
	// While the engine still owes its answer, a later Unmap cannot prove
	// its range unreachable either: it fails too, and keeps its frames.
	err, _ = within(t, "a second Unmap beside the wedged engine", func() error { return c.Unmap(second) })
	require.ErrorIs(t, err, ErrTimeout, "a second Unmap while the engine owes its acknowledgement")
	require.Equal(t, inUse, d.MemoryInUse(), "MemoryInUse after the second timed-out Unmap")
	otherEngineWorks(t, d, c, other)
	w.release()
	require.NoError(t, p.Wait(), "the wedged COPY, let go")
	// The engine answers the generation it owes before it completes the
	// COPY (device/ring.go, complete), so an Unmap made the moment the
	// COPY is seen complete finds it answered, though it looks only once.
	if err, _ := within(t, "Unmap after the engine is let go", func() error { return c.Unmap(other) }); err != nil {
		t.Fatalf("Unmap once the engine answers again = %v; want success", err)
	}
}

// TestHostFreeHasADeadline: with the copy engine held inside a COPY from
// a pinned region (its window entry held), HostFree returns ErrTimeout
// within its bound; the region stays mapped (the engine still reads it);
// HostFree of another region returns within its bound too; the compute
// engine keeps working, and once the engine is let go its COPY completes
// from the region's bytes.
func TestHostFreeHasADeadline(t *testing.T) {
	d := openWedgeable(t)
	c := d.DefaultContext()
	p, err := d.HostAlloc(4096)
	require.NoError(t, err)
	fillBytes(p.Bytes(), 0x77)
	q, err := d.HostAlloc(4096)
	require.NoError(t, err)
	dst, err := d.Alloc(4096)
	require.NoError(t, err)
	fill, err := d.Alloc(4096)
	require.NoError(t, err)
	w, pend := stickCopy(t, d, c, p.Bus(), dst)
	err, took := within(t, "HostFree beside a wedged engine", func() error { return d.HostFree(p) })
	require.ErrorIs(t, err, ErrTimeout, "HostFree of a region an engine holds for ever")
	t.Logf("HostFree returned after %v: %v", took, err)
	// Another region, whose entry no engine holds: the device takes a
	// region out of its reach only once no engine holds any entry
	// (device/dma.go, UnregisterHost), so this free must not wait on the
	// hung engine without a bound either.
	err, _ = within(t, "HostFree of a region no engine holds, beside a wedged engine", func() error { return d.HostFree(q) })
	if err != nil && !errors.Is(err, ErrTimeout) {
		t.Fatalf("HostFree of a region no engine holds, beside a wedged engine = %v; want success or ErrTimeout", err)
	}
	otherEngineWorks(t, d, c, fill)
	w.release()
	require.NoError(t, pend.Wait(), "the wedged COPY, let go")
	for i, b := range readPA(d, dst, 4096) {
		require.Equal(t, byte(0x77), b, "destination byte %d; want 0x77, the region's bytes (it must stay mapped while held)", i)
	}
}

// TestNewChannelHasADeadline: with the copy engine held inside a command
// (it takes a runlist only between commands), NewChannel on it returns
// ErrTimeout within its bound; a channel on the compute engine opens and
// works, and once the engine is let go a channel on it opens again.
func TestNewChannelHasADeadline(t *testing.T) {
	d := openWedgeable(t)
	c := newContext(t, d)
	src, _ := c.Alloc(4096, abi.Page4K)
	dst, _ := c.Alloc(4096, abi.Page4K)
	w, p := stickCopy(t, d, c, src, dst)
	opts := ChannelOptions{Priority: abi.PriorityNormal}
	err, took := within(t, "NewChannel on a wedged engine", func() error {
		_, err := d.NewChannel(abi.EngineCopy, c, opts)
		return err
	})
	require.ErrorIs(t, err, ErrTimeout, "NewChannel on an engine that never takes its runlist")
	t.Logf("NewChannel returned after %v: %v", took, err)
	err, _ = within(t, "NewChannel on the compute engine", func() error {
		ch, err := d.NewChannel(abi.EngineCompute, c, opts)
		if err != nil {
			return err
		}
		return ch.Submit(abi.Command{Op: abi.OpFill, Dst: src, Size: 4096, Value: 1})
	})
	require.NoError(t, err, "a channel on the compute engine beside a wedged copy engine")
	w.release()
	require.NoError(t, p.Wait(), "the wedged COPY, let go")
	err, _ = within(t, "NewChannel once the engine is let go", func() error {
		ch, err := d.NewChannel(abi.EngineCopy, c, opts)
		if err != nil {
			return err
		}
		if err := ch.Submit(abi.Command{Op: abi.OpFill, Dst: dst, Size: 4096, Value: 2}); err != nil {
			return err
		}
		return ch.Close()
	})
	require.NoError(t, err, "a channel on the copy engine once it answers again")
}

// TestCloseHasADeadline: with the copy engine held inside a command, the
// driver's Close returns ErrTimeout within its bound instead of waiting for
// the device to stop, and the wedged command's waiter returns ErrClosed;
// once the engine is let go the device stops, and no goroutine is left
// behind (openWith's leak check).
func TestCloseHasADeadline(t *testing.T) {
	d := openWedgeable(t)
	c := newContext(t, d)
	src, _ := c.Alloc(4096, abi.Page4K)
	dst, _ := c.Alloc(4096, abi.Page4K)
	w, p := stickCopy(t, d, c, src, dst)
	err, took := within(t, "Close beside a wedged engine", d.Close)
	require.ErrorIs(t, err, ErrTimeout, "Close of a device whose engine never stops")
	t.Logf("Close returned after %v: %v", took, err)
	// The COPY's waiter is not left behind with the engine: Close took
	// its channel as removed.
	if err, _ := within(t, "the wedged COPY's Wait after Close", p.Wait); !errors.Is(err, ErrClosed) {
		t.Fatalf("the wedged COPY's Wait after a timed-out Close = %v; want ErrClosed", err)
	}
	w.release()
	within(t, "the device stopping once the engine is let go", func() error {
		for !d.stopped() {
			time.Sleep(time.Millisecond)
		}
		return nil
	})
}
