package softgpu_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage5-vm"
	"softgpu/stage5-vm/driver"
	"softgpu/stage5-vm/internal/leakcheck"
)

// The stepped device is what BenchmarkRoundTripStepped and
// BenchmarkRoundTripFloor stand on: a GPU whose commands run on the
// caller's goroutine, from the driver's hook after the doorbell. If the
// hook stepped the wrong engine, or the device ran commands on a goroutine
// of its own, those rows would measure something else; these tests would
// fail instead.

// hangGuard panics if the test is still running after 10 s, naming what
// hung: a call on a stepped GPU that nobody steps waits for ever, and this
// says why sooner and more plainly than go test's timeout would. Call the
// function it returns when the guarded part is done.
func hangGuard(what string) (done func()) {
	timer := time.AfterFunc(10*time.Second, func() {
		panic(what + " on a stepped GPU did not return in 10 s: the hook did not step its engine")
	})
	return func() { timer.Stop() }
}

func TestASteppedGPURunsEveryCommandOnTheCaller(t *testing.T) {
	leakcheck.Check(t)
	g, stop, err := softgpu.OpenStepped(softgpu.Config{MemorySize: 4 << 20})
	require.NoError(t, err)
	done := hangGuard("Write, Fill, Copy, Read or a NOP")
	a := mustAlloc(t, g, 1000)
	b := mustAlloc(t, g, 1000)
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i)
	}
	must(t, g.Write(a, src))
	must(t, g.Fill(a+100, 50, 0xcc))
	must(t, g.Copy(b, a, 1000))
	got := make([]byte, 1000)
	must(t, g.Read(got, b))
	want := bytes.Clone(src)
	copy(want[100:150], bytes.Repeat([]byte{0xcc}, 50))
	require.Equal(t, want, got, "Read after Write, Fill, Copy on a stepped GPU")
	must(t, g.Nop(softgpu.Compute))
	must(t, g.Nop(softgpu.Copy))
	// From stage 5 on, freeing memory unmaps it, and the unmap waits for
	// every engine that may hold its translation: never for a stepped one,
	// which is idle between Steps.
	must(t, g.Free(a))
	must(t, g.Free(b))
	stop()
	done()
}

func TestASteppedDeviceRunsNothingUnstepped(t *testing.T) {
	leakcheck.Check(t)
	g, stop, err := softgpu.OpenStepped(softgpu.Config{MemorySize: 4 << 20})
	require.NoError(t, err)
	g.SetHooks(driver.Hooks{}) // nobody steps
	errc := make(chan error, 1)
	go func() { errc <- g.Nop(softgpu.Copy) }()
	select {
	case err := <-errc:
		t.Fatalf("a NOP nobody stepped returned (%v): the stepped device ran it on its own", err)
	case <-time.After(50 * time.Millisecond):
	}
	// Stopping publishes DeviceStopped, and the waiter's next look at the
	// device state ends its wait: the NOP was never run.
	done := hangGuard("stop")
	stop()
	done()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, softgpu.ErrClosed, "the unstepped NOP after stop")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter for an unstepped NOP was still waiting 10 s after stop")
	}
}
