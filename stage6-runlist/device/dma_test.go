package device

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage6-runlist/abi"
)

// The tests here play the driver's part of the DMA window by hand: they map
// host memory, hand it to the device, store its entry's registers, and
// disable entries, as driver/pinned.go does.

// mapHost maps n bytes of anonymous memory, outside the Go heap as the
// driver's are, and returns them with their host address; they are unmapped
// when the test ends (after the device closes: cleanups run last-registered
// first, so call it before openTest).
func mapHost(t testing.TB, n int) ([]byte, uint64) {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err, "mmap %d bytes", n)
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem, addressOf(mem)
}

// give hands host memory to the device, as the driver's HostAlloc does.
func give(t testing.TB, d *Device, mem ...[]byte) {
	t.Helper()
	for _, m := range mem {
		require.NoError(t, d.RegisterHost(m))
	}
}

// register maps window entry slot onto size bytes at host address host, at
// bus address bus.
func register(d *Device, slot int, host, size, bus uint64) {
	w := abi.WindowRegs(slot)
	d.regs.Store(w+abi.RegWinHost, host)
	d.regs.Store(w+abi.RegWinBus, bus)
	d.regs.Store(w+abi.RegWinSize, size)
	d.regs.Store(w+abi.RegWinEnable, 1)
}

// held returns engine e's RegDMAHeld.
func held(d *Device, e abi.Engine) uint64 {
	return d.regs.Load(abi.EngineStatusPage(e) + abi.RegDMAHeld)
}

// Two regions, adjacent on the bus and unrelated in host memory.
const (
	regionSize = 8192
	busA       = abi.BusBase + 1<<20
	busB       = busA + regionSize
)

func TestDMACommands(t *testing.T) {
	a, aHost := mapHost(t, regionSize)
	b, bHost := mapHost(t, regionSize)
	d := openTest(t, Config{})
	give(t, d, a, b)
	register(d, 0, aHost, regionSize, busA)
	register(d, 5, bHost, regionSize, busB)
	le := binary.LittleEndian
	tests := []struct {
		name   string
		engine abi.Engine
		cmd    abi.Command
		// model applies the expected effect to copies of device memory
		// and the two regions.
		model func(mem, a, b []byte)
	}{
		{"host to device", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: busA + 10, Dst: 4096, Size: 5000},
			func(m, a, b []byte) { copy(m[4096:9096], a[10:5010]) }},
		{"device to host", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 100, Dst: busB + 3, Size: 8189},
			func(m, a, b []byte) { copy(b[3:], m[100:8289]) }},
		{"host to host, across regions", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: busB, Dst: busA, Size: regionSize},
			func(m, a, b []byte) { copy(a, b) }},
		{"host to host, overlapping", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: busA, Dst: busA + 1, Size: 4000},
			func(m, a, b []byte) { copy(a[1:4001], a[:4000]) }},
		{"whole region", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: busB, Dst: 0, Size: regionSize},
			func(m, a, b []byte) { copy(m, b) }},
		{"zero bytes at a region's end", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: busB + regionSize, Dst: 0, Size: 0},
			func(m, a, b []byte) {}},
		{"fill host memory", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: busA + 8000, Size: 192, Value: 0xee},
			func(m, a, b []byte) { copy(a[8000:], bytes.Repeat([]byte{0xee}, 192)) }},
		{"kernel reads host memory", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: busA, Size: 8, Dst: busB + 64},
			func(m, a, b []byte) { le.PutUint64(b[64:], uint64(le.Uint32(a))+uint64(le.Uint32(a[4:]))) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := data(d)
			pattern(mem)
			pattern(a)
			pattern(b[17:]) // a different pattern from a's
			want := [3][]byte{bytes.Clone(mem), bytes.Clone(a), bytes.Clone(b)}
			tt.model(want[0], want[1], want[2])
			require.Equal(t, abi.StatusOK, run(t, d, tt.engine, tt.cmd), "%v", tt.cmd.Op)
			for i, got := range [3][]byte{mem, a, b} {
				if j := firstDiff(got, want[i]); j >= 0 {
					t.Errorf("%s differs from the model at byte %d: got %#x, want %#x",
						[]string{"device memory", "region A", "region B"}[i], j, got[j], want[i][j])
				}
			}
			assert.Equal(t, uint64(0), held(d, tt.engine), "RegDMAHeld after the command; want 0 (released)")
		})
	}
}

// TestDMABadAddresses checks each way a bus address can be wrong, and that
// a refused command changes nothing and holds nothing.
func TestDMABadAddresses(t *testing.T) {
	const maxU = 1<<64 - 1
	a, aHost := mapHost(t, regionSize)
	b, bHost := mapHost(t, regionSize)
	c, cHost := mapHost(t, regionSize)
	unregistered, uHost := mapHost(t, regionSize)
	d := openTest(t, Config{})
	give(t, d, a, b, c)
	register(d, 0, aHost, regionSize, busA)
	register(d, 1, bHost, regionSize, busB)
	register(d, 2, cHost, regionSize, abi.BusBase+1<<30)
	d.regs.Store(abi.WindowRegs(2)+abi.RegWinEnable, 0) // registered, then disabled
	// Entries naming host memory the device was never given: mapped but
	// not registered, a wild address, and a registered region's range run
	// past its end. Each would have been a pointer into the process.
	register(d, 3, uHost, regionSize, abi.BusBase+2<<30)
	register(d, 4, 0xdead0000, regionSize, abi.BusBase+3<<30)
	register(d, 6, aHost+regionSize/2, regionSize, abi.BusBase+4<<30)
	_ = unregistered
	copyCmd := func(src, dst, size uint64) abi.Command {
		return abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: size}
	}
	tests := []struct {
		name string
		cmd  abi.Command
		want abi.Status
	}{
		{"unregistered bus address", copyCmd(abi.BusBase, 0, 8), abi.StatusNoDMA},
		{"just below a region", copyCmd(busA-1, 0, 2), abi.StatusNoDMA},
		{"disabled entry", copyCmd(abi.BusBase+1<<30, 0, 8), abi.StatusNoDMA},
		{"destination unregistered", copyCmd(0, busB+regionSize, 1), abi.StatusNoDMA},
		{"zero bytes past a region's end", copyCmd(0, busB+regionSize+1, 0), abi.StatusNoDMA},
		{"past the end of a region", copyCmd(busB+regionSize-8, 0, 9), abi.StatusOutOfRange},
		{"straddling two adjacent regions", copyCmd(busB-8, 0, 16), abi.StatusOutOfRange},
		{"straddling, as destination", copyCmd(0, busA+100, regionSize), abi.StatusOutOfRange},
		{"size overflows", copyCmd(busA, 0, maxU-4), abi.StatusOutOfRange},
		{"address at the top", copyCmd(maxU-7, 0, 16), abi.StatusOutOfRange},
		{"between device memory and the bus", copyCmd(testMem, 0, 8), abi.StatusOutOfRange},
		{"just below BusBase", copyCmd(abi.BusBase-4, 0, 8), abi.StatusOutOfRange},
		{"misaligned before unmapped", abi.Command{Op: abi.OpSum32, Src: abi.BusBase + 2, Dst: 0, Size: 4}, abi.StatusMisaligned},
		{"entry names unregistered memory", copyCmd(abi.BusBase+2<<30, 0, 8), abi.StatusNoDMA},
		{"entry names a wild address", copyCmd(0, abi.BusBase+3<<30, 8), abi.StatusNoDMA},
		{"entry runs past its region", copyCmd(abi.BusBase+4<<30, 0, 8), abi.StatusNoDMA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine := abi.EngineCopy
			if tt.cmd.Op == abi.OpSum32 {
				engine = abi.EngineCompute
			}
			mem := data(d)
			pattern(mem)
			pattern(a)
			pattern(b)
			want := [3][]byte{bytes.Clone(mem), bytes.Clone(a), bytes.Clone(b)}
			assert.Equal(t, tt.want, run(t, d, engine, tt.cmd), "%v src %#x dst %#x size %d", tt.cmd.Op, tt.cmd.Src, tt.cmd.Dst, tt.cmd.Size)
			for i, got := range [3][]byte{mem, a, b} {
				if j := firstDiff(got, want[i]); j >= 0 {
					t.Errorf("a refused command changed byte %d of %s", j, []string{"device memory", "region A", "region B"}[i])
				}
			}
			assert.Equal(t, uint64(0), held(d, engine), "RegDMAHeld after a refused command")
		})
	}
}

// TestUnregisterWaitsForTheHolder stops the copy engine in the middle of a
// COPY out of region A, holding it, and plays the driver's unregister: the
// hold must stay visible until the COPY is done, a command that reaches the
// entry after it was disabled must fail, and the COPY that held it must
// complete in full.
func TestUnregisterWaitsForTheHolder(t *testing.T) {
	stopped, resume := make(chan struct{}), make(chan struct{})
	first := true
	testHookHeld = func(e abi.Engine, entry int) {
		if e == abi.EngineCopy && first { // only the copy engine goroutine reads first
			first = false
			close(stopped)
			<-resume
		}
	}
	t.Cleanup(func() { testHookHeld = nil }) // after the device has closed: registered first, runs last
	a, aHost := mapHost(t, regionSize)
	d := openTest(t, Config{})
	// Registered after openTest, so it runs before the device closes: a
	// test that fails while the engine is stopped in the hook lets it go,
	// and Close does not hang on it.
	var resumed sync.Once
	release := func() { resumed.Do(func() { close(resume) }) }
	t.Cleanup(release)
	pattern(a)
	give(t, d, a)
	register(d, 3, aHost, regionSize, busA)

	copyChannel := abi.DefaultChannel(abi.EngineCopy)
	c := abi.Command{Op: abi.OpCopy, Src: busA, Dst: 0, Size: regionSize}
	c.Encode(slot(d, copyChannel, 0))
	ringDoorbell(d, copyChannel, 1)
	// The watchdogs below are 10 s: a bug here is a wait that never ends,
	// not a slow one.
	select {
	case <-stopped: // the engine holds entry 3 and has not copied yet
	case <-time.After(10 * time.Second):
		t.Fatalf("the copy engine did not take a hold on entry 3 within 10 s")
	}

	d.regs.Store(abi.WindowRegs(3)+abi.RegWinEnable, 0) // (3): unregister
	if h := held(d, abi.EngineCopy); h != 1<<3 {        // (4): the driver would wait
		t.Errorf("RegDMAHeld of the copy engine mid-command = %#x; want %#x", h, 1<<3)
	}
	// The compute engine comes to the entry after it was disabled: refused.
	assert.Equal(t, abi.StatusNoDMA, run(t, d, abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: busA, Dst: 0, Size: 64}), "SUM32 from a disabled entry")
	time.Sleep(time.Millisecond) // the hold must last however long the command does
	assert.Equal(t, uint64(1<<3), held(d, abi.EngineCopy), "RegDMAHeld while the COPY is still stopped")
	// UnregisterHost must wait for the holder too: the memory stays the
	// device's until the COPY is done.
	unregistered := make(chan error, 1)
	go func() { unregistered <- d.UnregisterHost(a) }()
	select {
	case err := <-unregistered:
		t.Fatalf("UnregisterHost returned (%v) while a COPY held the region", err)
	case <-time.After(5 * time.Millisecond):
	}
	release()
	select {
	case err := <-unregistered:
		assert.NoError(t, err, "UnregisterHost")
	case <-time.After(10 * time.Second):
		t.Fatalf("UnregisterHost still waiting 10 s after the COPY that held the region went on")
	}
	waitCompleted(t, d, copyChannel, 0)
	assert.Equal(t, abi.StatusOK, statusOf(d, copyChannel, 0), "the COPY that held the entry; want ok (it resolved before the unregister)")
	assert.Equal(t, uint64(0), held(d, abi.EngineCopy), "RegDMAHeld after the COPY")
	assert.Equal(t, a, data(d)[:regionSize], "the COPY that held the entry did not copy the whole region")
}

func TestRegisterHostChecks(t *testing.T) {
	a, _ := mapHost(t, regionSize)
	d := openTest(t, Config{})
	assert.ErrorIs(t, d.RegisterHost(nil), ErrHostRegion, "RegisterHost(nil)")
	give(t, d, a)
	assert.ErrorIs(t, d.RegisterHost(a[100:200]), ErrHostRegion, "RegisterHost of an overlapping region")
	assert.ErrorIs(t, d.UnregisterHost(a[:100]), ErrHostRegion, "UnregisterHost of a region never registered")
	assert.NoError(t, d.UnregisterHost(a), "UnregisterHost")
	assert.ErrorIs(t, d.UnregisterHost(a), ErrHostRegion, "a second UnregisterHost")
}
