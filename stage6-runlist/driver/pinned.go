package driver

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"softgpu/stage6-runlist/abi"
)

// Pinned host memory: the driver's side of the DMA window (the device's side
// is device/dma.go, the layout abi/dma.go).
//
// A region's life:
//
//	HostAlloc   mmap anonymous memory (outside the Go heap)
//	            mlock it (the kernel may no longer page it out or move it)
//	            hand it to the device (Hardware.RegisterHost, the IOMMU)
//	            register: take a free window entry and a bus range, store
//	            the entry's host address, bus address and size, then store
//	            RegWinEnable = 1 — the point from which commands may name it
//	  ...       COPY (or any command) names it by bus address; the engine
//	            reads and writes the pages directly
//	HostFree    note each channel's tail: the commands queued before the free
//	            unregister: store RegWinEnable = 0, then wait until no
//	            engine's RegDMAHeld has the entry's bit
//	            take it from the device (UnregisterHost), munmap it
//	            retire the entry and the bus range until every channel has
//	            completed what was queued before the free; only then may
//	            HostAlloc hand them out again
//
// Freeing a region while commands name it. A command that is running and
// holds the entry finishes, and HostFree waits for it; a command that
// reaches the entry after HostFree disabled it fails with abi.StatusNoDMA —
// including one queued before the free that runs long after it: its bus
// address is not handed to another region until it has run, so it can
// never land in memory allocated since. (IOMMU drivers defer the reuse of
// I/O addresses the same way, and TTM delays the destruction of a buffer
// the GPU may still use.) HostFree does not wait for those queued
// commands; CUDA's cudaFreeHost synchronises the whole device instead.
//
// Driver state, guarded by Driver.pinMu:
//
//	slotsInUse  bit i set from HostAlloc taking entry i until the entry has
//	            retired; a set bit is never handed out
//	regions     the live regions: a region is live from HostAlloc until
//	            HostFree takes it out; copies recognise pinned slices in
//	            pinnedSpans, a snapshot of it (nolock.go)
//	busSpace    the bus ranges in use or retiring, as offsets from abi.BusBase
//	retiring    freed entries and bus ranges, each with the channel tails
//	            it waits for
//
// An entry's registers have one writer at a time: register fills them in
// under pinMu, right after taking the entry's bit; HostFree disables and
// drains the entry without the lock (the wait may last a command), and the
// entry is reused only after it has retired.

// Pinned is a region of pinned host memory, mapped for DMA. Bytes is
// ordinary memory to the host; Bus is the address that names it in a
// command.
type Pinned struct {
	mapping []byte // all of the mmap, page-rounded: what munmap is given
	bytes   []byte // the size the caller asked for, at the start of mapping
	host    uint64 // the host address of bytes[0]
	bus     uint64 // the bus address of bytes[0]
	slot    int    // its DMA window entry

	mapped []contextVA // where user contexts map it (context.go); guarded by Driver.pinMu
}

// Bytes returns the region's memory. It must not be used after HostFree:
// the pages are unmapped, and touching them faults.
func (p *Pinned) Bytes() []byte { return p.bytes }

// Bus returns the bus address of the region's first byte: a device address
// that any command may name, up to Bus()+len(Bytes()).
func (p *Pinned) Bus() uint64 { return p.bus }

// retired is a freed window entry and bus range, waiting for the commands
// queued before its free.
type retired struct {
	slot  int
	bus   uint64        // offset from abi.BusBase
	marks []channelMark // each channel's tail when the region was freed
}

var (
	// ErrPinLimit reports that the kernel refused to lock memory in RAM,
	// almost always because of the process's RLIMIT_MEMLOCK. It wraps the
	// errno as well.
	ErrPinLimit = errors.New("softgpu: cannot pin host memory")
	// ErrNoWindow reports that every DMA window entry is in use, or that
	// no bus addresses are left.
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
		return nil, fmt.Errorf("%w: HostAlloc of %d bytes: more than the %d-byte bus address space", ErrNoWindow, size, uint64(abi.BusSize))
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
	if err := d.hw.RegisterHost(p.bytes); err != nil {
		unix.Munmap(mapping)
		return nil, err
	}
	if err := d.register(p); err != nil {
		d.hw.UnregisterHost(p.bytes)
		unix.Munmap(mapping)
		return nil, err
	}
	return p, nil
}

// ANCHOR_END: hostalloc

// register gives p a window entry and a bus range, and enables the entry.
// If every entry is taken but some are only retiring — freed, with
// commands queued before the free still to run — it waits until any of
// them has retired: the engines get there by running what is already
// queued. Any, not the oldest: entries need not retire in the order they
// joined retiring (HostFree takes its marks before it appends, so two
// that overlap may append in either order), and one that retires while
// the head still waits is taken at once — as is one that joins during
// the wait having retired already.
func (d *Driver) register(p *Pinned) error {
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	for {
		d.reclaimLocked()
		slot := -1
		for i := range abi.WindowSlots {
			if d.slotsInUse&(1<<i) == 0 {
				slot = i
				break
			}
		}
		var off uint64
		var err error
		if slot >= 0 {
			// Aligned to 2 MiB, so that a context can map the region
			// with its largest pages.
			off, err = d.busSpace.AllocAligned(uint64(len(p.mapping)), 2<<20)
		}
		if slot >= 0 && err == nil {
			d.enableLocked(p, slot, off)
			return nil
		}
		if len(d.retiring) == 0 {
			if slot < 0 {
				return fmt.Errorf("%w: all %d are mapped", ErrNoWindow, abi.WindowSlots)
			}
			// Not %w of err: the bus allocator's error is ErrOutOfMemory,
			// and device memory is not what ran out.
			return fmt.Errorf("%w: no %d-byte range of bus addresses left (%d of %d in use or retiring)",
				ErrNoWindow, len(p.bytes), d.busSpace.InUse(), uint64(abi.BusSize))
		}
		// Polls a copy of retiring without pinMu, which HostFree takes to
		// append: an entry's marks never change once it is retiring. The
		// loads in retired pair with the stores that publish each
		// channel's progress (see retired). The load of retiringAdds
		// pairs with HostFree's add after its append; pinMu, taken
		// again, then shows the new entry.
		waiting, adds := slices.Clone(d.retiring), d.retiringAdds.Load()
		d.pinMu.Unlock()
		if h := d.hooks.Retiring; h != nil {
			h() // a test may let a held free, or the work one waits for, go here
		}
		spinUntil(func() bool { return d.retiringAdds.Load() != adds || slices.ContainsFunc(waiting, d.retired) })
		d.pinMu.Lock()
	}
}

// enableLocked records p in window entry slot at bus offset off, and
// enables the entry.
func (d *Driver) enableLocked(p *Pinned, slot int, off uint64) {
	d.slotsInUse |= 1 << slot
	p.slot, p.bus = slot, abi.BusBase+off
	d.regions = append(d.regions, p)
	d.publishSpansLocked()
	w := abi.WindowRegs(slot)
	d.regs.Store(w+abi.RegWinHost, p.host)
	d.regs.Store(w+abi.RegWinBus, p.bus)
	d.regs.Store(w+abi.RegWinSize, uint64(len(p.bytes)))
	// This store publishes the three above; the engine's loads of
	// RegWinEnable in busRun pair with it. The entry is disabled and
	// drained until now (HostFree, or New, left it so), so no engine
	// reads the fields while they change.
	d.regs.Store(w+abi.RegWinEnable, 1)
}

// ANCHOR: hostfree

// HostFree unregisters a region and unmaps it. It waits for the commands
// that are touching the region at that moment; a command that names the
// region later fails with abi.StatusNoDMA, even one queued before the free,
// since the region's bus addresses are not reused until the commands queued
// before the free have run. HostFree works after Close too (Close leaves
// the caller's regions mapped).
func (d *Driver) HostFree(p *Pinned) error {
	var marks []channelMark
	for _, ch := range d.liveChannels() {
		marks = append(marks, channelMark{ch, ch.mark()}) // before the entry is disabled: these are the commands that might name it
	}
	d.pinMu.Lock()
	live := slices.Index(d.regions, p)
	if live < 0 {
		d.pinMu.Unlock()
		return ErrBadHostFree // never allocated, or freed already
	}
	d.regions = slices.Delete(d.regions, live, live+1)
	d.publishSpansLocked()
	mapped := slices.Clone(p.mapped)
	d.pinMu.Unlock()
	// Out of every user context first, with their TLBs: once the bus range
	// retires it may name another region, which those contexts must not
	// reach.
	for _, m := range mapped {
		m.ctx.Unmap(m.va)
	}

	w := abi.WindowRegs(p.slot)
	// (3) in device/dma.go: from this store on, an engine that has not
	// yet taken a hold on the entry will not use it.
	d.regs.Store(w+abi.RegWinEnable, 0)
	// (4): wait out the engines that took a hold before the store.
	d.waitUnheld(uint64(1) << p.slot)
	if err := d.hw.UnregisterHost(p.bytes); err != nil {
		panic(fmt.Sprintf("driver: invariant broken: a live region was not registered with the device: %v", err))
	}
	if err := unix.Munmap(p.mapping); err != nil {
		panic(fmt.Sprintf("driver: munmap of a region HostAlloc mapped: %v", err))
	}
	p.mapping, p.bytes = nil, nil

	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	d.retiring = append(d.retiring, retired{slot: p.slot, bus: p.bus - abi.BusBase, marks: marks})
	d.retiringAdds.Add(1) // after the append: a waiting register takes pinMu when it sees this
	return nil
}

// ANCHOR_END: hostfree

// reclaimLocked gives back to the free pool every retired entry and bus
// range whose channels have completed everything queued before its free.
func (d *Driver) reclaimLocked() {
	d.retiring = slices.DeleteFunc(d.retiring, func(r retired) bool {
		if !d.retired(r) {
			return false
		}
		d.slotsInUse &^= 1 << r.slot
		if err := d.busSpace.Free(r.bus); err != nil {
			panic(fmt.Sprintf("driver: invariant broken: a retired bus range was not allocated: %v", err))
		}
		return true
	})
}

// retired reports whether every channel has completed the commands queued
// before r was freed — or the device has stopped: nothing will run again.
// A faulted channel counts as passed: the device runs nothing more of its
// ring, so the commands below its mark that never ran never will. So does
// a channel its engine has let go (Channel.released): the engine took a
// list without it, and runs nothing of it again.
func (d *Driver) retired(r retired) bool {
	if d.stopped() {
		return true
	}
	for _, m := range r.marks {
		// The fault alone does not cover a channel closed while faulted:
		// drain skips it, and the handover (device/sched.go, reset) clears
		// its fault and leaves its completions below the mark, so after
		// the close neither test would hold again; released does. It is
		// stored after the driver's load of RegRunlistAck has seen the
		// engine take a list without the channel (runlist.go), or the
		// device stop; the engine stores that acknowledgement after the
		// drain and the reset (checkRunlist). So a load here that sees it
		// comes after the engine's last touch of the channel. Not removed,
		// which queuedPassed (deferred.go) takes: Close sets that for its
		// waiters even when the engine has not taken a list without the
		// channel — refused it, or in stage 9 not yet answered
		// (ErrTimeout) — and may still run what the channel queued.
		if !m.ch.passed(m.mark) && m.ch.faultError() == nil && !m.ch.released.Load() {
			return false
		}
	}
	return true
}

// channelMark is a channel's mark (the index its next command will take)
// at one moment.
type channelMark struct {
	ch   *Channel
	mark uint64
}

// ANCHOR: waitunheld

// waitUnheld waits until no engine holds any of the window entries in
// bits. Its loads of RegDMAHeld pair with the engines' stores in busRun
// and releaseDMA. The wait is one command long at most: an engine holds an
// entry only while a command that resolved it runs; a stopped engine holds
// nothing.
func (d *Driver) waitUnheld(bits uint64) {
	spinUntil(func() bool {
		var held uint64
		for e := range abi.Engine(abi.NumEngines) {
			held |= d.regs.Load(abi.EngineStatusPage(e) + abi.RegDMAHeld)
		}
		return held&bits == 0
	})
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
	for _, r := range d.spans() { // a snapshot, not pinMu (nolock.go)
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
