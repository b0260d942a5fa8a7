package driver

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/device"
)

// The tests of virtual memory: contexts, page tables, the TLB handshake.

// newContext makes a context that is closed when the test ends.
func newContext(t testing.TB, d *Driver) *Context {
	t.Helper()
	c, err := d.NewContext()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// in runs cmd in context c on engine e and waits for it.
func in(d *Driver, c *Context, e abi.Engine, cmd abi.Command) error {
	cmd.Ctx = c.ID()
	return d.Submit(e, cmd)
}

// readPA reads n bytes of device memory at physical address pa.
func readPA(d *Driver, pa, n uint64) []byte { return bytes.Clone(d.hw.Memory()[pa : pa+n]) }

// paOf returns the physical address of the device memory a context maps at
// va, from the driver's own record of the mapping.
func paOf(t testing.TB, c *Context, va uint64) uint64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.mappings {
		if va >= m.va && va-m.va < m.size {
			return m.pa + va - m.va
		}
	}
	t.Fatalf("no mapping holds %#x", va)
	return 0
}

// TestContextsReadAndWriteTheirOwnMemory: a context's commands work on its
// own VAs, with every page size, across page boundaries, and land in the
// device memory its mapping names.
func TestContextsReadAndWriteTheirOwnMemory(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	for _, page := range []abi.PageSize{abi.Page4K, abi.Page64K, abi.Page2M} {
		t.Run(page.String(), func(t *testing.T) {
			c := newContext(t, d)
			const size = 4 << 20
			va, err := c.Alloc(size, page)
			require.NoError(t, err)
			assert.Equal(t, uint64(0), va%uint64(page), "VA %#x is not aligned to %v", va, page)
			// A fill that straddles a page boundary, then a copy across
			// several pages, overlapping its source from above.
			boundary := va + uint64(page)
			require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: boundary - 100, Size: 200, Value: 0xab}))
			require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: boundary - 100, Dst: boundary - 50, Size: 3 * 4096}))
			got := readPA(d, paOf(t, c, boundary-100), 250)
			for i, b := range got {
				require.Equal(t, byte(0xab), b, "byte %d around the page boundary", i)
			}
			require.NoError(t, c.Unmap(va))
		})
	}
}

// TestACopyAcrossApertures: a VA range whose first part maps device memory
// and whose rest maps pinned host memory is one operand: a COPY into it
// writes both.
func TestACopyAcrossApertures(t *testing.T) {
	d := openPinned(t, device.Config{MemorySize: 16 << 20}, Config{})
	c := newContext(t, d)
	host := hostAlloc(t, d, 8192)
	const va = 64 << 20 // a VA of the test's choosing, out of the allocator's way
	devPA, err := d.alloc.AllocAligned(8192, 4096)
	require.NoError(t, err)
	_, err = d.mapRange(c.root, va, devPA, 8192, abi.Page4K, true, false)
	require.NoError(t, err)
	_, err = d.mapRange(c.root, va+8192, host.Bus(), 8192, abi.Page4K, true, true)
	require.NoError(t, err)
	require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va + 4096, Size: 8192, Value: 0x5c}))
	assert.Equal(t, bytes.Repeat([]byte{0x5c}, 4096), readPA(d, devPA+4096, 4096), "the device half of the fill did not land")
	assert.Equal(t, bytes.Repeat([]byte{0x5c}, 4096), host.Bytes()[:4096], "the host half of the fill did not land")
	assert.Equal(t, byte(0), host.Bytes()[4096], "the fill ran past its end into host memory")
}

// TestIsolation: no command of context B reaches context A's memory,
// whatever address it names: A's VAs, A's physical addresses, device
// memory nobody mapped for B, bus addresses, the page-table pool, and
// ranges that wrap. Each faults; A's data is intact; B is sticky until
// cleared; the engine answers afterwards.
func TestIsolation(t *testing.T) {
	d := openPinned(t, device.Config{MemorySize: 16 << 20}, Config{})
	a, b := newContext(t, d), newContext(t, d)
	aVA, err := a.Alloc(64<<10, abi.Page4K)
	require.NoError(t, err)
	require.NoError(t, in(d, a, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: aVA, Size: 64 << 10, Value: 0xaa}))
	aPA := paOf(t, a, aVA)
	pinned := hostAlloc(t, d, 4096)
	bVA, err := b.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	// The two address spaces are independent: B's first page has the same
	// VA as A's, and holds B's bytes.
	require.Equal(t, aVA, bVA, "B's first VA %#x differs from A's %#x; the case below needs them equal", bVA, aVA)
	require.NoError(t, in(d, b, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: bVA, Size: 4096, Value: 0xbb}))
	targets := []struct {
		name       string
		addr, size uint64
		translated bool // false: refused before translation (the range wraps): no fault is recorded
	}{
		{"A's VA past B's page", aVA + 4096, 64, true},
		{"A's physical address", aPA, 64, true},
		{"device memory at 0", 0, 64, true},
		{"from B's page into the next", bVA + 4000, 200, true},
		{"a pinned region's bus address", pinned.Bus(), 64, true},
		{"the page-table pool", d.vm.dataSize, 64, true},
		{"the top of the address space", 1<<abi.VABits - 64, 64, true},
		{"past the address space", 1 << abi.VABits, 64, true},
		{"wrapping 2^64", 1<<64 - 32, 64, false},
	}
	for _, tt := range targets {
		for _, op := range []string{"write", "read"} {
			t.Run(tt.name+"/"+op, func(t *testing.T) {
				cmd := abi.Command{Op: abi.OpFill, Dst: tt.addr, Size: tt.size, Value: 0xbb}
				if op == "read" {
					cmd = abi.Command{Op: abi.OpCopy, Src: tt.addr, Dst: bVA, Size: min(tt.size, 200)}
				}
				err := in(d, b, abi.EngineCopy, cmd)
				require.Error(t, err, "%s of %#x+%d in context B succeeded", op, tt.addr, tt.size)
				if !errors.Is(err, abi.StatusOutOfRange) && !errors.Is(err, abi.StatusCtxFaulted) {
					t.Errorf("%s of %#x = %v; want a fault (StatusOutOfRange)", op, tt.addr, err)
				}
				if !tt.translated {
					return
				}
				assert.Error(t, b.Err(), "context B has no fault recorded after %s of %#x", op, tt.addr)
				// Sticky: B's next command fails too, until cleared.
				assert.ErrorIs(t, in(d, b, abi.EngineCopy, abi.Command{Op: abi.OpNop}), abi.StatusCtxFaulted, "B's next command after a fault")
				b.ClearFault()
				assert.NoError(t, in(d, b, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: bVA, Size: 8}), "B after ClearFault")
			})
		}
	}
	assert.Equal(t, bytes.Repeat([]byte{0xaa}, 64<<10), readPA(d, aPA, 64<<10), "context A's memory changed")
	assert.NoError(t, a.Err(), "context A has a fault")
	for _, x := range pinned.Bytes() {
		require.Equal(t, byte(0), x, "a pinned region B never mapped was written")
	}
}

// TestFaultKinds: an unmapped VA, a write to a read-only page and a
// malformed entry each fail with their status and record the VA and kind;
// the engine goes on, and the other context's data is intact.
func TestFaultKinds(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c, other := newContext(t, d), newContext(t, d)
	ova, err := other.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	in(d, other, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: ova, Size: 4096, Value: 0x11})
	pa, err := d.alloc.AllocAligned(8192, 4096)
	require.NoError(t, err)
	w, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	const ro, bad = 80 << 20, 90 << 20
	require.NoError(t, d.mapPage(c.root, ro, pa, abi.Page4K, false, false))
	require.NoError(t, d.mapPage(c.root, bad, pa+4096, abi.Page4K, true, false))
	// Corrupt bad's leaf: a 2 MiB page kind at level 3, which no walk accepts.
	leaf := c.root
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		leaf = loadPTE(d.vm.pool.mem, leaf+abi.LevelIndex(bad, level)*8).Frame()
	}
	storePTE(d.vm.pool.mem, leaf+abi.LevelIndex(bad, abi.LeafLevel)*8, abi.MakePage(pa+4096, abi.PTEPage2M, true, false))
	tests := []struct {
		name  string
		cmd   abi.Command
		want  abi.Status
		fault abi.Fault
		va    uint64
	}{
		{"unmapped", abi.Command{Op: abi.OpFill, Dst: 70 << 20, Size: 8}, abi.StatusOutOfRange, abi.FaultUnmapped | abi.FaultWrite, 70 << 20},
		{"read-only", abi.Command{Op: abi.OpFill, Dst: ro + 8, Size: 8}, abi.StatusReadOnly, abi.FaultReadOnly | abi.FaultWrite, ro + 8},
		{"reading a read-only page", abi.Command{Op: abi.OpCopy, Src: ro, Dst: w, Size: 64}, abi.StatusOK, 0, 0},
		{"malformed, read", abi.Command{Op: abi.OpSum32, Src: bad + 16, Dst: ova, Size: 8}, abi.StatusBadEntry, abi.FaultMalformed, bad + 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := abi.EngineCopy
			if tt.cmd.Op == abi.OpSum32 {
				e = abi.EngineCompute
			}
			err := in(d, c, e, tt.cmd)
			if tt.want == abi.StatusOK {
				if err != nil || c.Err() != nil {
					t.Fatalf("%s = %v, context error %v; want success", tt.name, err, c.Err())
				}
				return
			}
			require.ErrorIs(t, err, tt.want, "%s", tt.name)
			var fe *FaultError
			if !errors.As(c.Err(), &fe) || fe.VA != tt.va || fe.Fault != tt.fault {
				t.Errorf("fault recorded = %v; want VA %#x, %v", c.Err(), tt.va, tt.fault)
			}
			c.ClearFault()
		})
	}
	assert.NoError(t, in(d, other, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "the other context after all that")
	assert.Equal(t, bytes.Repeat([]byte{0x11}, 4096), readPA(d, paOf(t, other, ova), 4096), "the other context's memory changed")
}

// TestContextsRunOut: the device has MaxContexts; the driver's own is one
// of them; a closed context's id comes back.
func TestContextsRunOut(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 64 << 20}, Config{})
	var cs []*Context
	for {
		c, err := d.NewContext()
		if err != nil {
			require.ErrorIs(t, err, ErrContext, "NewContext; want ErrContext when none are left")
			break
		}
		cs = append(cs, c)
	}
	assert.Equal(t, abi.MaxContexts-1, len(cs), "made %d contexts", len(cs))
	cs[5].Close()
	c, err := d.NewContext()
	require.NoError(t, err, "NewContext after a Close")
	assert.Equal(t, cs[5].ID(), c.ID(), "new context has id %d; want the closed one's", c.ID())
	assert.ErrorIs(t, d.DefaultContext().Close(), ErrContext, "closing the default context")
	for _, c := range append(cs, c) {
		c.Close()
	}
	assert.ErrorIs(t, in(d, cs[0], abi.EngineCopy, abi.Command{Op: abi.OpNop}), abi.StatusBadContext, "a command of a closed context")
}

// ANCHOR: unmapstress
// TestNothingLandsAfterUnmap is the invalidation stress test, in every idle
// mode. A streamer copies and fills in a loop through a mapping while the
// test unmaps it and maps another in its place, over and over. After each
// Unmap returns, the freed physical pages are poisoned and watched: if any
// engine still used a stale translation — the handshake let Unmap return
// before every TLB had dropped it — a later command would write the freed
// pages, and the poison would change. Every command either succeeds or
// faults; none touches memory after its unmap returned.
func TestNothingLandsAfterUnmap(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for _, idle := range []IdleMode{IdleSpin, IdleSleep, IdleHybrid, IdleAdaptive} {
		t.Run(idle.String(), func(t *testing.T) {
			d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{Idle: Idle{Mode: idle, Budget: 5_000}})
			c := newContext(t, d)
			const size = 64 << 10
			var current atomic.Uint64 // the VA the streamer uses
			va, err := c.Alloc(size, abi.Page4K)
			require.NoError(t, err)
			current.Store(va)
			var stop atomic.Bool
			var wg sync.WaitGroup
			for _, e := range []abi.Engine{abi.EngineCopy, abi.EngineCompute} {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(e), 5))
					for !stop.Load() {
						v := current.Load()
						cmd := abi.Command{Op: abi.OpFill, Dst: v + uint64(rng.IntN(size/64))*64, Size: 64, Value: 0x77}
						if e == abi.EngineCompute {
							cmd = abi.Command{Op: abi.OpAdd32, Dst: v + uint64(rng.IntN(size/64))*64, Size: 64, Value: 1}
						}
						err := in(d, c, e, cmd)
						if err != nil && !errors.Is(err, abi.StatusOutOfRange) && !errors.Is(err, abi.StatusCtxFaulted) {
							t.Errorf("a command on %v = %v", e, err)
							return
						}
						if errors.Is(err, abi.StatusCtxFaulted) || errors.Is(err, abi.StatusOutOfRange) {
							c.ClearFault()
						}
						if rng.IntN(8) == 0 {
							time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond) // let engines idle, and sleep
						}
					}
				})
			}
			type freed struct{ pa uint64 }
			var poisoned []freed
			mem := d.hw.Memory()
			for range rounds {
				old := current.Load()
				pa := paOf(t, c, old)
				next, err := c.Alloc(size, abi.Page4K)
				require.NoError(t, err)
				current.Store(next)
				require.NoError(t, c.Unmap(old))
				// Unmap has returned: the pages are free, and nothing may
				// write them. Take them back from the allocator so no one
				// else does either — once the commands queued before the
				// Unmap have run, which is when they return to it — and
				// poison them.
				waitReclaimed(d, pa)
				if got, err := d.alloc.AllocAligned(size, 4096); err != nil || got != pa {
					if err == nil {
						d.alloc.Free(got)
					}
					continue // the allocator handed them elsewhere; watch the next round's
				}
				for i := range uint64(size) {
					mem[pa+i] = 0xdd
				}
				poisoned = append(poisoned, freed{pa})
			}
			stop.Store(true)
			wg.Wait()
			for _, f := range poisoned {
				for i := range uint64(size) {
					require.Equal(t, byte(0xdd), mem[f.pa+i], "freed page at %#x changed at byte %d after its Unmap returned: a stale translation was used", f.pa, i)
				}
			}
			if len(poisoned) == 0 {
				t.Fatal("no freed range was ever watched")
			}
		})
	}
}

// ANCHOR_END: unmapstress

// waitReclaimed waits until the deferred free of device memory at pa has
// passed the work queued before it and gone back to the allocator.
func waitReclaimed(d *Driver, pa uint64) {
	spinUntil(func() bool {
		d.reclaimFreed()
		d.vm.freeMu.Lock()
		defer d.vm.freeMu.Unlock()
		return !d.vm.deferredPA[pa]
	})
}

// TestNothingIsReadAfterUnmap is TestNothingLandsAfterUnmap's other half,
// built deterministically with the device's Resolved hook: the moment the
// copy engine has translated a COPY's source run, another goroutine unmaps
// the source, and as soon as Unmap returns, writes a next owner's bytes
// into the frame the source was mapped to. The engine, holding the source
// run, then translates the destination and — in the hook, before it moves
// a byte — gives Unmap time to return. It must not: an engine answers an
// invalidation only at a safe point (device/mmu.go), and a translation is
// not one. The COPY delivers the old owner's bytes, never the new owner's.
//
// The test writes into the old frame itself rather than allocating one:
// the allocator now holds a freed frame back until the work queued before
// the free has run, so an allocation would be given another frame, and the
// test would pass with the safe points gone (it did). That second guard is
// tested on its own; this test is about the first.
func TestNothingIsReadAfterUnmap(t *testing.T) {
	const oldOwner, newOwner = 0xaa, 0xbb
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{Idle: Idle{Mode: IdleSpin}})
	c := newContext(t, d)
	mem := d.hw.Memory()
	src, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	dst, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	srcPA, dstPA := paOf(t, c, src), paOf(t, c, dst)
	fillBytes(mem[srcPA:srcPA+4096], oldOwner)
	reused := make(chan struct{}) // closed once Unmap has returned and the next owner has written
	var unmapErr error
	gen := d.regs.Load(abi.RegInvalGen)
	d.hw.(*device.Device).SetHooks(device.Hooks{Resolved: func(e abi.Engine, va uint64, write bool) {
		switch {
		case va == src && !write:
			go func() {
				defer close(reused)
				if unmapErr = c.Unmap(src); unmapErr != nil {
					return
				}
				fillBytes(mem[srcPA:srcPA+4096], newOwner) // the next owner, had it been given the frame
			}()
			for d.regs.Load(abi.RegInvalGen) == gen {
				runtime.Gosched() // until Unmap has asked for the invalidation
			}
		case va == dst && write:
			// Unmap needs this engine's acknowledgement; if the engine
			// gave it while translating the destination, Unmap returns
			// now and the next owner writes. 100 ms is ample for that,
			// and the wait can only miss it, never fail the test wrongly.
			select {
			case <-reused:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}})
	require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: 4096}), "COPY; want success (its source was mapped when it was translated)")
	<-reused
	require.NoError(t, unmapErr)
	for i, b := range mem[dstPA : dstPA+4096] {
		require.Equal(t, byte(oldOwner), b, "destination byte %d, the source's bytes before its Unmap (%#x is the next owner's)", i, newOwner)
	}
}

func fillBytes(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// TestUnmapDoesNotWakeASleeper: with both engines asleep, Unmap returns
// without waking either (the sleep counters do not move), and a command
// after it that names the unmapped VA faults — the sleeper checked the
// generation on waking.
func TestUnmapDoesNotWakeASleeper(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{Idle: Idle{Mode: IdleSleep}})
	c := newContext(t, d)
	va, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	for _, e := range []abi.Engine{abi.EngineCopy, abi.EngineCompute} { // both TLBs hold the page
		cmd := abi.Command{Op: abi.OpFill, Dst: va, Size: 8}
		if e == abi.EngineCompute {
			cmd = abi.Command{Op: abi.OpAdd32, Dst: va, Size: 8}
		}
		require.NoError(t, in(d, c, e, cmd))
	}
	asleep(t, d, 2)
	sleeps := func() uint64 {
		return d.regs.Load(abi.EngineStatusPage(0)+abi.RegSleeps) + d.regs.Load(abi.EngineStatusPage(1)+abi.RegSleeps)
	}
	before := sleeps()
	require.NoError(t, c.Unmap(va))
	if sleeping(d) != 2 || sleeps() != before {
		t.Errorf("Unmap woke an engine: %d asleep, sleeps %d → %d", sleeping(d), before, sleeps())
	}
	assert.ErrorIs(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va, Size: 8}), abi.StatusOutOfRange, "a fill of the unmapped VA on a woken engine; want StatusOutOfRange (a fault)")
}

// TestHostFreeUnmapsEverywhere: a pinned region mapped in a context is
// unmapped from it by HostFree; the context's VA then faults.
func TestHostFreeUnmapsEverywhere(t *testing.T) {
	d := openPinned(t, device.Config{MemorySize: 16 << 20}, Config{})
	c := newContext(t, d)
	p, err := d.HostAlloc(4096)
	require.NoError(t, err)
	va, err := c.Map(p, 0)
	require.NoError(t, err)
	require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va, Size: 4096, Value: 3}))
	require.Equal(t, byte(3), p.Bytes()[4095], "the fill through the mapping did not land")
	require.NoError(t, d.HostFree(p))
	assert.ErrorIs(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va, Size: 8}), abi.StatusOutOfRange, "a fill of a freed region's VA; want a fault")
}

// FuzzTranslation maps a random layout of pages — sizes, apertures,
// read-only or not, holes — in a context, then runs a FILL of a random VA
// and size, and checks the contract: the fill succeeds only if every byte
// it names is mapped writable, and it writes nothing but the bytes its
// mapping names.
func FuzzTranslation(f *testing.F) {
	f.Add(uint64(1), uint64(0), uint64(4096))
	f.Add(uint64(7), uint64(4000), uint64(300))
	f.Add(uint64(3), uint64(1<<20-8), uint64(1<<20))
	dev, err := device.Open(device.Config{MemorySize: 32 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(dev.Close)
	d, err := New(dev, Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	const base, span = 256 << 20, 4 << 20
	f.Fuzz(func(t *testing.T, layout, off, size uint64) {
		c, err := d.NewContext()
		require.NoError(t, err)
		defer c.Close()
		rng := rand.New(rand.NewPCG(layout, 1))
		pa, err := d.alloc.AllocAligned(span, 2<<20)
		require.NoError(t, err)
		defer d.alloc.Free(pa)
		mem := d.hw.Memory()
		for i := range uint64(span) {
			mem[pa+i] = 0xee
		}
		type page struct{ writable, mapped bool }
		pages := make([]page, span/4096) // by 4 KiB page
		for at := uint64(0); at < span; {
			size := []abi.PageSize{abi.Page4K, abi.Page64K, abi.Page2M}[rng.IntN(3)]
			if at%uint64(size) != 0 || at+uint64(size) > span {
				size = abi.Page4K
			}
			p := page{writable: rng.IntN(4) != 0, mapped: rng.IntN(5) != 0}
			if p.mapped {
				require.NoError(t, d.mapPage(c.root, base+at, pa+at, size, p.writable, false))
			}
			for i := at / 4096; i < (at+uint64(size))/4096; i++ {
				pages[i] = p
			}
			at += uint64(size)
		}
		va := base + off%(span+8192) - 4096 // from just below the span to just past it
		size %= span
		err = in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va, Size: size, Value: 0x33})
		allWritable := true
		for a := va; a < va+size; a = (a&^4095 + 4096) {
			if a < base || a >= base+span || !pages[(a-base)/4096].mapped || !pages[(a-base)/4096].writable {
				allWritable = false
				break
			}
		}
		if size > 0 && allWritable != (err == nil) {
			t.Fatalf("FILL [%#x, +%d): %v; every byte mapped writable: %v", va, size, err, allWritable)
		}
		for i := range uint64(span) {
			inside := base+i >= va && base+i-va < size
			if mem[pa+i] != 0xee && (!inside || !pages[i/4096].mapped || !pages[i/4096].writable) {
				t.Fatalf("FILL [%#x, +%d) wrote byte %d of the span, which it did not name writable", va, size, i)
			}
		}
	})
}

// TestUnmapDoesNotWaitForAnIdleEngine: an engine that has run out of
// commands holds no translation, so an Unmap must not wait for it to run —
// on two cores an idle engine's thread is often runnable but not running,
// behind the very thread that unmaps. The device's Idle hook holds the copy
// engine, idle, with its TLB warm for src; Unmap must return while it is
// held. Released, the engine must not use the entry it held: a COPY from
// the unmapped src faults.
func TestUnmapDoesNotWaitForAnIdleEngine(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{Idle: Idle{Mode: IdleSpin}})
	c := newContext(t, d)
	src, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	dst, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	var hold atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	d.hw.(*device.Device).SetHooks(device.Hooks{
		// Armed while the COPY below holds src's translation, so the idle
		// that follows it, not one before it, is the one held.
		Resolved: func(e abi.Engine, va uint64, write bool) {
			if e == abi.EngineCopy && va == src && !write {
				hold.Store(true)
			}
		},
		Idle: func(e abi.Engine) {
			if e == abi.EngineCopy && hold.CompareAndSwap(true, false) {
				close(held)
				<-release
			}
		},
	})
	require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: 4096}))
	<-held
	unmapped := make(chan error, 1)
	go func() { unmapped <- c.Unmap(src) }()
	select {
	case err := <-unmapped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release) // let Unmap finish, so the test can end
		<-unmapped
		t.Fatal("Unmap waited for an idle engine the kernel had not run (held 10 s in the Idle hook)")
	}
	close(release)
	assert.ErrorIs(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: 4096}), abi.StatusOutOfRange,
		"a COPY from the unmapped src after the engine left idle; want StatusOutOfRange (a fault), not the frame its TLB held")
}

// TestAClosedContextRunsNothing: a command that names the id of a context
// just closed — on the engine that ran the context's last command — fails
// with StatusBadContext, and writes nothing through the freed tables.
// (The API refuses a closed Context before any command is written; this
// is the driver's own path, which names contexts by id, as the daemon's
// does for its clients in stage 9.)
func TestAClosedContextRunsNothing(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c, err := d.NewContext()
	require.NoError(t, err)
	va, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	pa := paOf(t, c, va)
	fill := abi.Command{Op: abi.OpFill, Dst: va, Size: 8, Value: 0x5a}
	require.NoError(t, in(d, c, abi.EngineCopy, fill), "FILL in the context")
	require.NoError(t, c.Close())
	d.hw.Memory()[pa] = 0
	fill.Value = 0xa5
	err = in(d, c, abi.EngineCopy, fill)
	var ce *CommandError
	require.ErrorAs(t, err, &ce, "FILL naming the closed context's id")
	assert.Equal(t, abi.StatusBadContext, ce.Status)
	assert.Equal(t, byte(0), d.hw.Memory()[pa], "a FILL in a closed context wrote where its page was")
}
