package driver

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"softgpu/stage7-idle/abi"
)

// Pinned host memory: the driver's side of the DMA window (the device's side
// is device/dma.go, the layout abi/dma.go).
//
// A region's life:
//
//	HostAlloc   mmap anonymous memory (outside the Go heap)
//	            mlock it (the kernel may no longer page it out or move it)
//	            register: take a free window entry and a bus range, store
//	            the entry's host address, bus address and size, then store
//	            RegWinEnable = 1 — the point from which commands may name it
//	  ...       COPY (or any command) names it by bus address; the engine
//	            reads and writes the pages directly
//	HostFree    unregister: store RegWinEnable = 0, then wait until no
//	            engine's RegDMAHeld has the entry's bit — the point after
//	            which no engine touches the pages
//	            munmap (which also unlocks); give back the entry and the
//	            bus range
//
// Freeing a region while commands name it. A command that is running and
// holds the entry finishes, and HostFree waits for it; a command that
// reaches the entry after HostFree disabled it fails with abi.StatusNoDMA.
// The engine can never touch unmapped memory: device/dma.go has the ordering
// argument. HostFree does not wait for commands still queued behind: they
// fail when they run. (CUDA's cudaFreeHost synchronizes the whole device
// first; see the exercises in the README.)
//
// Driver state, guarded by Driver.pinMu:
//
//	slotsInUse  bit i set from HostAlloc taking entry i until HostFree has
//	            drained it; a set bit is never handed out again
//	regions     the live regions: a region is live from HostAlloc until
//	            HostFree takes it out; copies recognise pinned slices in
//	            pinnedSpans, a snapshot of it (stage 4, nolock.go)
//	busSpace    the bus ranges in use, as offsets from abi.BusBase
//
// An entry's registers have one writer at a time: register fills them in
// under pinMu, right after taking the entry's bit; HostFree disables and
// drains the entry without the lock (the wait may last a command), and
// clears the bit only after that.

// Pinned is a region of pinned host memory, mapped for DMA. Bytes is
// ordinary memory to the host; Bus is the address that names it in a
// command.
type Pinned struct {
	mapping []byte // all of the mmap, page-rounded: what munmap is given
	bytes   []byte // the size the caller asked for, at the start of mapping
	host    uint64 // the host address of bytes[0]
	bus     uint64 // the bus address of bytes[0]
	slot    int    // its DMA window entry
}

// Bytes returns the region's memory. It must not be used after HostFree:
// the pages are unmapped, and touching them faults.
func (p *Pinned) Bytes() []byte { return p.bytes }

// Bus returns the bus address of the region's first byte: a device address
// that any command may name, up to Bus()+len(Bytes()).
func (p *Pinned) Bus() uint64 { return p.bus }

var (
	// ErrPinLimit reports that the kernel refused to lock memory in RAM,
	// almost always because of the process's RLIMIT_MEMLOCK. It wraps the
	// errno as well.
	ErrPinLimit = errors.New("softgpu: cannot pin host memory")
	// ErrNoWindow reports that every DMA window entry is in use.
	ErrNoWindow = errors.New("softgpu: no free DMA window entry")
	// ErrBadHostFree reports a HostFree of a region that is not live.
	ErrBadHostFree = errors.New("softgpu: HostFree of a region that is not allocated")
)

// ANCHOR: hostalloc
// HostAlloc returns size bytes of pinned host memory, registered with the
// device's DMA window. The memory is zeroed, page-aligned, and outside the
// Go heap; give it back with HostFree.
func (d *Driver) HostAlloc(size uint64) (*Pinned, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if size == 0 {
		return nil, ErrZeroSize
	}
	if size > abi.BusSize {
		return nil, fmt.Errorf("softgpu: HostAlloc of %d bytes: more than the %d-byte bus address space", size, uint64(abi.BusSize))
	}
	page := uint64(os.Getpagesize())
	length := (size + page - 1) &^ (page - 1)
	mapping, err := unix.Mmap(-1, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("softgpu: mmap of %d bytes: %w", length, err)
	}
	if err := unix.Mlock(mapping); err != nil {
		unix.Munmap(mapping)
		return nil, pinError(length, err)
	}
	p := &Pinned{mapping: mapping, bytes: mapping[:size:size], host: addressOf(mapping)}
	if err := d.register(p); err != nil {
		unix.Munmap(mapping)
		return nil, err
	}
	return p, nil
}

// ANCHOR_END: hostalloc

// register gives p a window entry and a bus range, and enables the entry.
func (d *Driver) register(p *Pinned) error {
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	slot := -1
	for i := range abi.WindowSlots {
		if d.slotsInUse&(1<<i) == 0 {
			slot = i
			break
		}
	}
	if slot < 0 {
		return fmt.Errorf("%w: all %d are mapped", ErrNoWindow, abi.WindowSlots)
	}
	off, err := d.busSpace.Alloc(uint64(len(p.bytes)))
	if err != nil {
		return fmt.Errorf("softgpu: no bus addresses left: %w", err)
	}
	d.slotsInUse |= 1 << slot
	p.slot, p.bus = slot, abi.BusBase+off
	d.regions = append(d.regions, p)
	w := abi.WindowRegs(slot)
	d.regs.Store(w+abi.RegWinHost, p.host)
	d.regs.Store(w+abi.RegWinBus, p.bus)
	d.regs.Store(w+abi.RegWinSize, uint64(len(p.bytes)))
	// This store publishes the three above; the engine's loads of
	// RegWinEnable in busSpan pair with it. The entry is disabled and
	// drained until now (HostFree, or New, left it so), so no engine
	// reads the fields while they change.
	d.regs.Store(w+abi.RegWinEnable, 1)
	d.publishSpansLocked()
	return nil
}

// ANCHOR: hostfree
// HostFree unregisters a region and unmaps it. It waits for the commands
// that are touching the region at that moment; a command that names the
// region later fails with abi.StatusNoDMA. HostFree works after Close too
// (Close leaves the caller's regions mapped).
func (d *Driver) HostFree(p *Pinned) error {
	d.pinMu.Lock()
	live := slices.Index(d.regions, p)
	if live < 0 {
		d.pinMu.Unlock()
		return ErrBadHostFree // never allocated, or freed already
	}
	d.regions = slices.Delete(d.regions, live, live+1)
	d.publishSpansLocked()
	d.pinMu.Unlock()

	w := abi.WindowRegs(p.slot)
	// (3) in device/dma.go: from this store on, an engine that has not
	// yet taken a hold on the entry will not use it.
	d.regs.Store(w+abi.RegWinEnable, 0)
	// (4): wait out the engines that took a hold before the store.
	d.waitUnheld(uint64(1) << p.slot)
	if err := unix.Munmap(p.mapping); err != nil {
		panic(fmt.Sprintf("driver: munmap of a region HostAlloc mapped: %v", err))
	}
	p.mapping, p.bytes = nil, nil

	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	d.slotsInUse &^= 1 << p.slot
	if err := d.busSpace.Free(p.bus - abi.BusBase); err != nil {
		panic(fmt.Sprintf("driver: invariant broken: bus range of a live region not allocated: %v", err))
	}
	return nil
}

// ANCHOR_END: hostfree

// ANCHOR: waitunheld
// waitUnheld spins until no engine holds any of the window entries in
// bits. Its loads of RegDMAHeld pair with the engines' stores in busSpan
// and releaseDMA. The wait is one command long at most: an engine holds an
// entry only while a command that resolved it runs. If the driver is closed
// meanwhile, it closes the device, which waits for the engines to stop; a
// stopped engine holds nothing.
func (d *Driver) waitUnheld(bits uint64) {
	for polls := 1; ; polls++ {
		var held uint64
		for e := range abi.Engine(abi.NumEngines) {
			held |= d.regs.Load(abi.EngineRegs(e) + abi.RegDMAHeld)
		}
		if held&bits == 0 {
			return
		}
		if d.closed.Load() {
			d.dev.Close()
			return
		}
		if d.yieldEvery > 0 && polls%d.yieldEvery == 0 {
			runtime.Gosched()
		}
	}
}

// ANCHOR_END: waitunheld

// resetWindow disables every window entry, as New takes the device over:
// entries an earlier driver registered name memory that driver owned.
func (d *Driver) resetWindow() {
	for i := range abi.WindowSlots {
		d.regs.Store(abi.WindowRegs(i)+abi.RegWinEnable, 0)
	}
	d.waitUnheld(^uint64(0))
}

// pinnedBus returns the bus address of b if all of b lies inside one live
// pinned region, so that a copy from or to it can skip the bounce ring.
func (d *Driver) pinnedBus(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	addr, size := addressOf(b), uint64(len(b))
	for _, r := range d.spans() { // stage 4: a snapshot, not pinMu (nolock.go)
		if off := addr - r.host; off < r.size && size <= r.size-off {
			return r.bus + off, true
		}
	}
	return 0, false
}

// pinError explains a failed mlock. The usual cause is RLIMIT_MEMLOCK: an
// unprivileged process may lock only that many bytes in all (8 MiB by
// default on recent kernels), and the kernel answers ENOMEM past it, or
// EPERM when the limit is zero.
func pinError(length uint64, err error) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("softgpu: mlock of %d bytes: %w", length, err)
	}
	limit := "unknown"
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
		limit = fmt.Sprintf("%d KiB", lim.Cur/1024)
		if lim.Cur == unix.RLIM_INFINITY {
			limit = "unlimited"
		}
	}
	return fmt.Errorf("%w: mlock of %d bytes: %w; the process may lock %s (RLIMIT_MEMLOCK, counting every region already pinned): "+
		"raise it with `ulimit -l` (in KiB) in the shell that starts the program, or LimitMEMLOCK= in its systemd unit, or give the program CAP_IPC_LOCK",
		ErrPinLimit, length, err, limit)
}
