package driver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/device"
)

// openPinned opens a device (4 MiB unless devCfg says) and a driver with
// cfg, through fence_test.go's openWith.
func openPinned(t testing.TB, devCfg device.Config, cfg Config) *Driver {
	t.Helper()
	if devCfg.MemorySize == 0 {
		devCfg.MemorySize = 4 << 20
	}
	return openWith(t, devCfg, cfg)
}

// hostAlloc is HostAlloc that fails the test on an error, and frees the
// region when the test ends unless the test freed it.
func hostAlloc(t testing.TB, d *Driver, size uint64) *Pinned {
	t.Helper()
	p, err := d.HostAlloc(size)
	require.NoError(t, err, "HostAlloc(%d)", size)
	t.Cleanup(func() { d.HostFree(p) })
	return p
}

// patterned returns n bytes that differ from position to position and from
// seed to seed, so a chunk copied to the wrong place shows.
func patterned(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131+i>>9) ^ seed
	}
	return b
}

func TestHostAlloc(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	page := uint64(os.Getpagesize())
	for _, size := range []uint64{1, 4096, 5000} {
		p := hostAlloc(t, d, size)
		if got := uint64(len(p.Bytes())); got != size {
			t.Errorf("HostAlloc(%d): %d bytes", size, got)
		}
		assert.Equal(t, make([]byte, size), p.Bytes(), "HostAlloc(%d): memory not zeroed", size)
		assert.Equal(t, uint64(0), p.host%page, "HostAlloc(%d) at host address %#x: not page-aligned", size, p.host)
		if p.Bus() < abi.BusBase || p.Bus()+size > abi.BusBase+abi.BusSize {
			t.Errorf("HostAlloc(%d): bus address %#x outside [BusBase, BusBase+BusSize)", size, p.Bus())
		}
		w := abi.WindowRegs(p.slot)
		regs := []struct {
			name      string
			off, want uint64
		}{
			{"RegWinHost", abi.RegWinHost, p.host},
			{"RegWinBus", abi.RegWinBus, p.Bus()},
			{"RegWinSize", abi.RegWinSize, size},
			{"RegWinEnable", abi.RegWinEnable, 1},
		}
		for _, r := range regs {
			assert.Equal(t, r.want, d.regs.Load(w+r.off), "HostAlloc(%d): entry %d's %s", size, p.slot, r.name)
		}
		require.NoError(t, d.HostFree(p), "HostFree")
		assert.Equal(t, uint64(0), d.regs.Load(w+abi.RegWinEnable), "RegWinEnable after HostFree")
		if p.Bytes() != nil {
			t.Errorf("Bytes after HostFree = %d bytes; want nil", len(p.Bytes()))
		}
		assert.ErrorIs(t, d.HostFree(p), ErrBadHostFree, "second HostFree")
	}
	_, err := d.HostAlloc(0)
	assert.ErrorIs(t, err, ErrZeroSize, "HostAlloc(0)")
	assert.ErrorIs(t, d.HostFree(&Pinned{}), ErrBadHostFree, "HostFree of a Pinned HostAlloc did not return")
}

func TestHostAllocAfterClose(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	p, err := d.HostAlloc(4096)
	require.NoError(t, err)
	d.Close()
	_, err = d.HostAlloc(4096)
	assert.ErrorIs(t, err, ErrClosed, "HostAlloc after Close")
	p.Bytes()[0] = 1 // Close leaves the caller's regions mapped
	assert.NoError(t, d.HostFree(p), "HostFree after Close")
}

// TestBusAddressesRunOut takes every bus address but leaves window entries
// free, and checks that HostAlloc says what ran out: ErrNoWindow, with the
// bus addresses in its message, and not ErrOutOfMemory — device memory is
// not what is short.
func TestBusAddressesRunOut(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	// Take what is free, largest pieces first, down to the allocator's
	// granule: about 32 sizes, a few allocations each.
	var taken []uint64
	d.pinMu.Lock()
	for size := uint64(abi.BusSize); size >= AllocAlign; {
		addr, err := d.busSpace.Alloc(size)
		if err != nil {
			size /= 2
			continue
		}
		taken = append(taken, addr)
	}
	d.pinMu.Unlock()
	_, err := d.HostAlloc(4096)
	if !errors.Is(err, ErrNoWindow) || errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "bus addresses") {
		t.Errorf("HostAlloc with no bus addresses left = %v; want ErrNoWindow naming the bus addresses, not ErrOutOfMemory", err)
	}
	d.pinMu.Lock()
	for _, addr := range taken {
		assert.NoError(t, d.busSpace.Free(addr))
	}
	d.pinMu.Unlock()
	hostAlloc(t, d, 4096) // and the space is usable again
}

// TestWindowFills takes every window entry (the bounce ring has one), and
// checks the next HostAlloc fails cleanly and a freed entry is reused.
func TestWindowFills(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	var regions []*Pinned
	for range abi.WindowSlots - 1 {
		regions = append(regions, hostAlloc(t, d, 256))
	}
	_, err := d.HostAlloc(256)
	require.ErrorIs(t, err, ErrNoWindow, "HostAlloc with every entry taken")
	slot := regions[10].slot
	require.NoError(t, d.HostFree(regions[10]))
	if p := hostAlloc(t, d, 256); p.slot != slot {
		t.Errorf("HostAlloc after freeing entry %d took entry %d", slot, p.slot)
	}
}

// TestPinnedCopies copies between device memory and pinned memory in both
// directions, by CopyToDevice and CopyFromDevice: each is one COPY, one
// doorbell, straight from or into the pinned pages.
func TestPinnedCopies(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	const dst = 1 << 20
	for _, size := range []int{1, 7, 4096, 64<<10 + 3, 1<<20 + 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := hostAlloc(t, d, uint64(size)+5)
			src := p.Bytes()[5:] // a slice inside the region, not at its start
			copy(src, patterned(size, 1))
			bells := d.Doorbells()
			require.NoError(t, d.CopyToDevice(dst, src), "CopyToDevice")
			if got := d.hw.Memory()[dst : dst+size]; !bytes.Equal(got, src) {
				t.Errorf("device memory after CopyToDevice differs at byte %d", firstDifference(got, src))
			}
			clear(p.Bytes())
			require.NoError(t, d.CopyFromDevice(p.Bytes()[:size], dst), "CopyFromDevice")
			if want := patterned(size, 1); !bytes.Equal(p.Bytes()[:size], want) {
				t.Errorf("pinned memory after CopyFromDevice differs at byte %d", firstDifference(p.Bytes(), want))
			}
			assert.Equal(t, uint64(2), d.Doorbells()-bells, "doorbells for two pinned copies; want 2 (one COPY each)")
		})
	}
}

// TestBusAddressChecks names two regions, adjacent on the bus, in commands
// the driver submits. Every way of getting the address wrong fails that
// command alone.
func TestBusAddressChecks(t *testing.T) {
	const region = 2 << 20 // the bus allocator aligns regions to 2 MiB
	d := openPinned(t, device.Config{}, Config{})
	a, b := hostAlloc(t, d, region), hostAlloc(t, d, region)
	require.Equal(t, a.Bus()+region, b.Bus(), "two %d-byte regions at bus %#x and %#x; want them adjacent (the bus allocator is first fit)", region, a.Bus(), b.Bus())
	freed := hostAlloc(t, d, region)
	require.NoError(t, d.HostFree(freed))
	cp := func(src, dst, size uint64) abi.Command {
		return abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: size}
	}
	tests := []struct {
		name string
		cmd  abi.Command
		want error
	}{
		{"whole region", cp(a.Bus(), 8192, region), nil},
		{"freed region", cp(freed.Bus(), 8192, 8), abi.StatusNoDMA},
		{"never registered", cp(abi.BusBase+abi.BusSize-4096, 8192, 8), abi.StatusNoDMA},
		{"past the end", cp(b.Bus()+region-96, 8192, 97), abi.StatusOutOfRange},
		{"straddling two regions", cp(a.Bus()+region-96, 8192, 200), abi.StatusOutOfRange},
		{"straddling, as destination", cp(8192, b.Bus()-1, 2), abi.StatusOutOfRange},
		{"overflow", cp(a.Bus(), 8192, ^uint64(0)-a.Bus()+2), abi.StatusOutOfRange},
	}
	for _, tt := range tests {
		err := d.Submit(abi.EngineCopy, tt.cmd)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: COPY src %#x dst %#x size %d = %v; want %v", tt.name, tt.cmd.Src, tt.cmd.Dst, tt.cmd.Size, err, tt.want)
		}
	}
}

// TestHostFreeWaitsForHolders plays an engine that holds a region (its
// RegDMAHeld bit set; the compute engine is idle, so nothing else writes the
// register). HostFree must disable the entry — so a new command naming the
// region fails — and must not unmap or return while the bit is set.
func TestHostFreeWaitsForHolders(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	p, err := d.HostAlloc(4096)
	require.NoError(t, err)
	heldReg := abi.EngineStatusPage(abi.EngineCompute) + abi.RegDMAHeld
	d.regs.Store(heldReg, 1<<p.slot)
	freed := make(chan error, 1)
	go func() { freed <- d.HostFree(p) }()
	enable := abi.WindowRegs(p.slot) + abi.RegWinEnable
	require.Eventually(t, func() bool { return d.regs.Load(enable) == 0 }, 10*time.Second, 100*time.Microsecond,
		"HostFree did not disable the entry in 10 s")
	assert.ErrorIs(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: p.Bus(), Dst: 8192, Size: 64}), abi.StatusNoDMA, "COPY from a region being freed")
	// Not a timing assertion: HostFree cannot return while the bit is
	// set, however long we look; 20 ms just gives a wrong one the chance.
	select {
	case err := <-freed:
		t.Fatalf("HostFree returned (%v) while an engine held the region", err)
	case <-time.After(20 * time.Millisecond):
	}
	d.regs.Store(heldReg, 0) // the engine's command ends
	select {
	case err := <-freed:
		assert.NoError(t, err, "HostFree")
	case <-time.After(10 * time.Second):
		t.Fatal("HostFree still waiting 10 s after the hold was released")
	}
}

// TestHostFreeWhileCopying frees a region while goroutines keep COPYs
// into and out of it going. Each COPY either succeeds or fails with
// StatusNoDMA; none may touch the region after it is unmapped (which would
// crash the test binary). TestPinnedCopies checks the bytes.
func TestHostFreeWhileCopying(t *testing.T) {
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	d := openPinned(t, device.Config{}, Config{})
	const size = 256 << 10
	for round := range rounds {
		p, err := d.HostAlloc(size)
		require.NoError(t, err)
		copy(p.Bytes(), patterned(size, byte(round)))
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[string]int{}
		for w := range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					// Worker 0 copies the region to device memory, worker 1
					// copies device memory into its second half.
					cmd := abi.Command{Op: abi.OpCopy, Src: p.Bus(), Dst: AllocBase, Size: size}
					if w == 1 {
						cmd = abi.Command{Op: abi.OpCopy, Src: AllocBase + size, Dst: p.Bus() + size/2, Size: size / 2}
					}
					err := d.Submit(abi.EngineCopy, cmd)
					mu.Lock()
					switch {
					case err == nil:
						counts["ok"]++
					case errors.Is(err, abi.StatusNoDMA):
						counts["nodma"]++
					default:
						t.Errorf("round %d: COPY during HostFree = %v; want nil or StatusNoDMA", round, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(round%3) * time.Millisecond)
		require.NoError(t, d.HostFree(p), "round %d: HostFree", round)
		wg.Wait()
		assert.Equal(t, 2, counts["nodma"], "round %d: %d workers saw StatusNoDMA", round, counts["nodma"])
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFreedMemoryIsNotReusedUnderAQueuedCommand: a FILL of region A queued
// behind a long DELAY, then A freed and B allocated. Were B given A's window
// entry and bus address at once, the FILL would land in B when it finally
// ran, and report success. The entry and the range retire until the
// commands queued before the free have run, so the FILL fails with
// StatusNoDMA and B is untouched.
func TestFreedMemoryIsNotReusedUnderAQueuedCommand(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	a := hostAlloc(t, d, 4096)
	delay, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: 30_000_000}}) // 30 ms
	require.NoError(t, err)
	fill, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpFill, Dst: a.Bus(), Size: 4096, Value: 0xee}})
	require.NoError(t, err)
	aBus := a.Bus()
	require.NoError(t, d.HostFree(a))
	b := hostAlloc(t, d, 4096)
	if b.Bus() == aBus {
		t.Errorf("B got A's bus address %#x while a command naming it was still queued", aBus)
	}
	require.NoError(t, delay.Wait())
	assert.ErrorIs(t, fill.Wait(), abi.StatusNoDMA, "the FILL queued before the free")
	for i, x := range b.Bytes() {
		require.Equal(t, byte(0), x, "byte %d of B: the FILL meant for A landed in B", i)
	}
	// Once the queued commands have run, the entry and the range come back.
	c := hostAlloc(t, d, 4096)
	d.HostFree(c)
}

// TestAFaultedChannelDoesNotHoldFreedRanges: a freed region's window entry
// and bus range retire once every channel has passed the commands queued
// before the free — and a channel that faulted never will, since the rest
// of its ring never runs. Such a channel must count as passed, or every
// later HostFree leaks its entry to it, and HostAlloc runs out.
func TestAFaultedChannelDoesNotHoldFreedRanges(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{})
	a := hostAlloc(t, d, 4096)
	// Queued behind a bad doorbell: the channel faults before the fill
	// runs, and it never will.
	fill := faultBehindADelay(t, d, abi.EngineCopy, []abi.Command{{Op: abi.OpFill, Dst: a.Bus(), Size: 64, Value: 1}})
	// Watch the fault register rather than wait on a fence: this test is
	// about retirement, not about how waits learn of a fault.
	waitUntil(t, "the copy channel faulted on the bad doorbell", func() bool { return fill.ch.faultError() != nil })
	done := make(chan error, 1)
	go func() {
		for range 2 * abi.WindowSlots {
			p, err := d.HostAlloc(4096)
			if err != nil {
				done <- err
				return
			}
			if err := d.HostFree(p); err != nil {
				done <- err
				return
			}
		}
		done <- d.HostFree(a)
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "HostAlloc and HostFree after the fault")
	case <-time.After(10 * time.Second):
		t.Fatalf("HostAlloc and HostFree after the fault did not finish in 10 s: the freed entries never retired")
	}
}

// TestAWindowEntryFreedBehindAFaultedChannelRetiresWhenTheChannelCloses:
// a region freed while a faulted channel still has commands queued that
// could name it retires once that channel is closed — an engine runs
// nothing of a channel it has let go. The close is what makes this hard:
// the engine does not drain a faulted channel, and the handover clears its
// fault and leaves its completions below the mark, so neither "passed"
// nor "faulted" ever holds for it again. Before, the entry and its bus
// range never came back, and once the window was full HostAlloc waited
// for them for ever. (In stage 9 a client's close after a fault, the
// usual cleanup, leaked an entry and its owed charge for the daemon's
// life.)
func TestAWindowEntryFreedBehindAFaultedChannelRetiresWhenTheChannelCloses(t *testing.T) {
	const limit = 250 * time.Millisecond // as TestWatchdogStopsOnlyTheHungChannel: far past any wait for a CPU
	d := openPinned(t, device.Config{}, Config{Watchdog: uint64(limit.Nanoseconds())})
	c := newContext(t, d)
	a := hostAlloc(t, d, 4096)
	va, err := c.Map(a, abi.Page4K)
	require.NoError(t, err)
	ch := newChannel(t, d, abi.EngineCopy, c, ChannelOptions{Priority: abi.PriorityNormal})
	// The watchdog stops the DELAY and faults the channel; the FILL of a
	// behind it never runs.
	_, err = ch.SubmitBatch([]abi.Command{{Op: abi.OpDelay, Value: 10_000_000_000}, {Op: abi.OpFill, Dst: va, Size: 64, Value: 1}})
	require.NoError(t, err)
	waitUntil(t, "the watchdog faulted the channel", func() bool { return ch.faultError() != nil })
	require.NoError(t, d.HostFree(a))
	require.False(t, ch.passed(ch.mark()), "the faulted channel passed its mark: the FILL behind the DELAY ran")
	require.NoError(t, ch.Close())

	// Every entry but the bounce ring's: the last one HostAlloc can take
	// is a's.
	done := make(chan error, 1)
	go func() {
		var taken []*Pinned
		var err error
		for err == nil && len(taken) < abi.WindowSlots-1 {
			var p *Pinned
			if p, err = d.HostAlloc(4096); err == nil {
				taken = append(taken, p)
			}
		}
		for _, p := range taken {
			d.HostFree(p)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "HostAlloc of every window entry after the faulted channel closed")
	case <-time.After(10 * time.Second):
		t.Fatalf("HostAlloc of every window entry after the faulted channel closed did not finish in 10 s: the entry freed behind the channel never retired")
	}
}
