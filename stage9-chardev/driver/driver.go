// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device. It reaches the device only
// through the Hardware interface (hardware.go).
//
// The driver has two halves. The device-wide half, Driver, owns what
// belongs to the whole device: device memory and its allocator, copies by
// DMA, pinned memory and the DMA window, interrupt handling, and stopping
// the device. The per-channel half, Channel (channel.go), submits commands
// on one channel and waits for them; it needs only the channel's registers
// and rings.
//
// Locking. There is no lock on the path from submission to completion:
// submitting, waiting and reaping are atomic operations on words with one
// stated writer each (nolock.go has the protocol). The locks that remain
// are all off that path. Two are held alone: each fence timeline's
// (fence.go), taken only by a waiter about to sleep and by the interrupt
// handler that wakes it; and the bounce ring's (bounce.go), which staged
// copies take turns on, for the buffers, not the ring of commands. Those
// of memory nest, and are taken in this order only, a lock only with
// none or those above it held:
//
//	runlists.engine[e]
//	            changes to engine e's runlist, held across the wait for
//	            its acknowledgement (runlist.go); then runlists.ids
//	um.mu       managed memory: every page's place (managed.go); the
//	            fault handler holds it while it serves a batch, and the
//	            daemon's pager calls run under it (server/pager.go)
//	vm.freeMu   the frees waiting for queued work (deferred.go)
//	ctx.mu      a context's mappings and addresses (context.go)
//	pinMu       pinned regions and where they are mapped (pinned.go); a
//	            copy finds its region in a snapshot, without it
//	vm.tableMu  the fragment fields' recomputation (fragment.go)
//	vm.invalMu  one invalidation at a time (vm.go)
//	the allocators' own locks: device memory, page tables, each
//	            context's addresses — leaves
//
// vm.mu, the list of contexts, is taken alone.
//
// Waits, in the daemon (stage 9's threat model; bound.go). Here the
// driver runs in softgpud, and every word a client can write is input:
// its ring, its doorbell, the commands it queues and how long they run.
// The rule: no wait of the driver's depends on a client's work without a
// bound. A command's time on an engine is bounded by the watchdog
// (Config.Watchdog; softgpud sets it by default, 2 s), which faults the
// channel and its context. A wait for a client's queued work waits only
// for channels that could name what it waits for (a freed window entry:
// the channels of contexts that mapped it, and context 0), and HostAlloc
// waits at most retireWait for an entry retiring behind queued commands,
// then returns ErrNoWindow. And no wait on an engine's own answer is
// without a deadline either (bound.go), though an engine cannot miss a
// safe point by construction: the daemon trusts no engine. A TLB
// invalidation's ack (invalidate) comes at the engine's next safe point,
// at most a run away: it waits engineBound. The DMA holds of a freed
// window entry (waitUnheld), a new runlist's ack (submitRunlist) and the
// device stopping (awaitStopped) come at the end of a command (a DELAY is
// cut short): they wait commandBound, engineBound past what the watchdog
// lets a command run.
// Past its deadline each returns an error wrapping ErrTimeout, which the
// call (Unmap, Context.Close, Managed.Free, HostFree, NewChannel,
// Channel.Close, Close) returns; the engine is taken as hung, later waits
// on the same answer fail at once rather than spin again, and what it may
// still touch is kept from reuse until it answers: the frames and tables
// an unacknowledged invalidation unmapped (for the driver's life), a
// held region's mapping, a channel's id, state block and save area, the
// bounce buffers. The other engine, and every channel on it, goes on.
// The driver has no reset of its own to give: the engine's reset line is
// the watchdog unit's (device/watchdog.go). softgpud's shutdownBound is
// the backstop: SIGTERM ends the daemon within it in every state. The
// in-process stages trust their one program and keep the plain spins;
// these bounds are stage 9's alone.
package driver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/mmio"
	"softgpu/stage9-chardev/trace"
)

// Config configures a driver.
type Config struct {
	// YieldEvery is when the driver calls runtime.Gosched while it waits
	// for a completion (the same trade as device.Config.YieldEvery): zero
	// means after spin.YieldAfter of polling; positive, every that many
	// polls; negative, never.
	YieldEvery int

	// How waits wait and how interrupts reach waiters (fence.go, irq.go).
	Wait       WaitMode // default WaitHybrid
	PollBudget uint64   // cycles a hybrid wait polls before it blocks; zero means DefaultPollBudget, sized for a copy (estimate.go)
	Delivery   Delivery // default IRQDirect
	Wake       Wake     // default WakeTargeted
	// SleepTimeout bounds how long a client's blocked waiter sleeps on its
	// fence word before it looks again (client.go); zero means 10 ms.
	SleepTimeout time.Duration

	// The ring of pinned bounce buffers that copies of ordinary slices go
	// through (bounce.go). Zero means DefaultBounceChunk bytes per buffer,
	// DefaultBounceBuffers buffers.
	BounceChunk   uint64
	BounceBuffers int

	// What the engines do when their rings are empty (idle.go); the zero
	// value is hybrid with a 50 µs budget.
	Idle Idle

	// Watchdog is the longest a command may run on an engine, in cycles
	// (ns), before the engine stops it with abi.StatusTimeout and faults
	// its channel and context (runlist.go); zero, the default, means no
	// limit.
	Watchdog uint64
	// PreemptTimeout is how long, in cycles (ns), a command an engine has
	// asked to give way to another channel may take to reach a
	// preemption point before the engine is reset under it, as under the
	// watchdog (abi.RegPreemptTimeout, device/preempttimeout.go); zero,
	// the default, means none. It only matters for a command with no
	// preemption point (a hung shader: abi.OpSpin), which without it holds
	// its engine until its cycles run out or the watchdog resets it.
	PreemptTimeout uint64

	// Managed memory (managed.go, faults.go): the fault handler's
	// prefetch policy, and its window in pages (zero means
	// DefaultPrefetchPages; at most 512); and the thrashing guard's
	// threshold, the moves to the device, each within 500 µs of the
	// last, after which a page is mapped remotely instead (zero means
	// DefaultThrashThreshold; negative turns the guard off).
	Prefetch        Prefetch
	PrefetchPages   int
	ThrashThreshold int
	// PrefetchDensity is PrefetchDensity's threshold, in percent of a
	// subtree's pages resident or faulted (blocks.go; zero means
	// DefaultPrefetchDensity); Eviction is how a page is chosen to leave
	// device memory when it is full (evict.go; the zero value is
	// EvictClock).
	PrefetchDensity int
	Eviction        Eviction

	sizedWait bool // set by check: PollBudget was left to the default, which the estimate may lengthen
}

// check fills in defaults and refuses values that name nothing, each with
// ErrConfig and the field's name: an unknown delivery path would leave
// every blocked wait without a wake-up.
func (cfg *Config) check() error {
	if cfg.PollBudget == 0 {
		cfg.PollBudget = DefaultPollBudget
		cfg.sizedWait = true
	}
	if cfg.SleepTimeout <= 0 {
		cfg.SleepTimeout = defaultSleepTimeout
	}
	if cfg.PrefetchPages == 0 {
		cfg.PrefetchPages = DefaultPrefetchPages
	}
	if cfg.ThrashThreshold == 0 {
		cfg.ThrashThreshold = DefaultThrashThreshold
	}
	if cfg.PrefetchDensity == 0 {
		cfg.PrefetchDensity = DefaultPrefetchDensity
	}
	switch {
	case !cfg.Prefetch.Defined():
		return fmt.Errorf("%w: Prefetch %v is not a policy", ErrConfig, cfg.Prefetch)
	case cfg.PrefetchPages < 1 || cfg.PrefetchPages > maxAdaptive:
		return fmt.Errorf("%w: PrefetchPages %d is not in [1, %d]", ErrConfig, cfg.PrefetchPages, maxAdaptive)
	case cfg.PrefetchDensity < 1 || cfg.PrefetchDensity > 100:
		return fmt.Errorf("%w: PrefetchDensity %d is not a percentage in [1, 100]", ErrConfig, cfg.PrefetchDensity)
	case !cfg.Eviction.Defined():
		return fmt.Errorf("%w: Eviction %v is not a policy", ErrConfig, cfg.Eviction)
	case !cfg.Wait.Defined():
		return fmt.Errorf("%w: Wait %d is not a wait mode", ErrConfig, cfg.Wait)
	case !cfg.Delivery.Defined():
		return fmt.Errorf("%w: Delivery %d is not a delivery path", ErrConfig, cfg.Delivery)
	case !cfg.Wake.Defined():
		return fmt.Errorf("%w: Wake %d is not a wake policy", ErrConfig, cfg.Wake)
	}
	if err := cfg.Idle.check(); err != nil {
		return err
	}
	return checkBounce(cfg)
}

// Driver is the device-wide half of the driver.
type Driver struct {
	ctxSaves   contextSaves // the channels' engine-context save areas (ctxsave.go)
	hw         Hardware
	regs       *mmio.Registers
	trace      *trace.Buffer // nil when tracing is off
	memSize    uint64
	yieldEvery int

	// Waiting and interrupts (fence.go, irq.go).
	waitMode   WaitMode
	pollBudget uint64
	sizedWait  bool // the default budget: a copy's wait may poll longer (estimate.go)
	delivery   Delivery
	wake       Wake
	irq        irq
	stats      stats

	alloc  *Allocator
	closed atomic.Bool // set once by Close; checked by every entry point and every wait

	um um // managed memory and its fault handler (managed.go, faults.go)

	// pinMu guards the driver's bookkeeping of pinned memory and the DMA
	// window (pinned.go). It is never held while waiting for the device.
	pinMu      sync.Mutex
	slotsInUse uint64     // bit i: window entry i is taken, or retiring
	regions    []*Pinned  // live regions
	busSpace   *Allocator // bus ranges in use or retiring, as offsets from abi.BusBase
	retiring   []retired  // freed entries waiting for the commands queued before their free
	// retiringAdds counts the entries HostFree has put on retiring: it
	// adds one after each append, holding pinMu; register's wait loads it
	// without pinMu, to see an entry that joined after its copy.
	retiringAdds atomic.Uint64
	// pinnedSpans is an immutable copy of the live regions' spans, for
	// pinnedBus to read without pinMu; replaced, under pinMu, whenever
	// regions changes (nolock.go).
	pinnedSpans atomic.Pointer[[]pinnedSpan]
	// holdsOwed is the window entries an engine still held when a wait
	// for them passed its bound (waitUnheld): written by the waits, read
	// by the next one, without pinMu.
	holdsOwed atomic.Uint64

	bounce bounceRing // staging for copies of ordinary slices (bounce.go)

	vm vm // page tables, contexts, TLB invalidation (vm.go)

	// channels[c] is the driver's half of channel c, or nil while the
	// driver has not made it (runlist.go); the engines' default channels
	// always exist.
	channels  [abi.NumChannels]atomic.Pointer[Channel]
	runlists  runlists
	doorbells atomic.Uint64 // doorbell stores so far, for the benchmarks' doorbells/op

	hooks Hooks // test and benchmark hooks (hooks.go)
}

// New binds a driver to hw. The device may have run commands for an
// earlier driver: New picks each channel up where its doorbell left it, and
// waits for a command still in flight to finish, so that its completion is
// never mistaken for one of ours. It refuses a device that has stopped or
// whose channels an earlier driver left faulted. It disables every DMA
// window entry (an earlier driver's regions are not ours to use) and pins
// the bounce buffers: a failure to pin them is ErrPinLimit.
func New(hw Hardware, cfg Config) (*Driver, error) {
	regs := hw.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if regs.Load(abi.RegDeviceState) != abi.DeviceRunning {
		return nil, fmt.Errorf("%w: the device has stopped", ErrClosed)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	memSize := regs.Load(abi.RegMemSize)
	if memSize != uint64(len(hw.Memory())) {
		return nil, fmt.Errorf("%w: RegMemSize reads %d, but the aperture has %d bytes", ErrNoDevice, memSize, len(hw.Memory()))
	}
	d := &Driver{
		hw:         hw,
		regs:       regs,
		trace:      hw.Trace(),
		memSize:    memSize,
		yieldEvery: cfg.YieldEvery,
		waitMode:   cfg.Wait,
		pollBudget: cfg.PollBudget,
		sizedWait:  cfg.sizedWait,
		delivery:   cfg.Delivery,
		wake:       cfg.Wake,
		busSpace:   NewAllocator(abi.BusSize),
	}
	for e := range abi.Engine(abi.NumEngines) {
		ch, err := d.newChannel(abi.DefaultChannel(e), e)
		if err != nil {
			return nil, err
		}
		ch.privileged, ch.prio = true, abi.PriorityNormal
		d.channels[ch.id].Store(ch)
	}
	if err := d.initVM(); err != nil {
		return nil, err
	}
	for e := range abi.Engine(abi.NumEngines) {
		ch := d.channels[abi.DefaultChannel(e)].Load()
		// Preemptible, as every channel the driver makes. The block is not
		// cleared: device memory starts zeroed, and on a device an earlier
		// driver used it may hold the channel's preempted command.
		ch.state = d.runlists.stateBlock(ch.id)
	}
	for e := range abi.Engine(abi.NumEngines) {
		if err := d.SetIdle(e, cfg.Idle); err != nil {
			return nil, err
		}
		d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, cfg.Watchdog)
		d.regs.Store(abi.EngineControlPage(e)+abi.RegPreemptTimeout, cfg.PreemptTimeout)
	}
	d.alloc = NewAllocator(d.vm.dataSize)
	if err := d.initContextSaves(); err != nil {
		return nil, err
	}
	for e := range abi.Engine(abi.NumEngines) {
		// Each engine's default channel alone, with its state block: a
		// device an earlier driver used may hold its channels, and they
		// are drained.
		if err := d.submitRunlist(e); err != nil {
			return nil, err
		}
	}
	if err := d.resetWindow(); err != nil {
		return nil, err
	}
	if err := d.initBounce(cfg); err != nil {
		return nil, err
	}
	if err := d.initFaults(cfg); err != nil {
		return nil, err
	}
	d.startIRQ()
	return d, nil
}

// Channel returns the driver's half of channel c, if the driver has made
// it.
func (d *Driver) Channel(c abi.Channel) (*Channel, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrNoChannel, c)
	}
	ch := d.channels[c].Load()
	if ch == nil {
		return nil, fmt.Errorf("%w: %v is not open", ErrNoChannel, c)
	}
	return ch, nil
}

// liveChannels returns the channels the driver has made, at this moment.
func (d *Driver) liveChannels() []*Channel {
	var chs []*Channel
	for c := range d.channels {
		if ch := d.channels[c].Load(); ch != nil {
			chs = append(chs, ch)
		}
	}
	return chs
}

// Submit runs cmd on engine e's channel and waits for it; see
// Channel.Submit.
func (d *Driver) Submit(e abi.Engine, cmd abi.Command) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	return d.channels[abi.DefaultChannel(e)].Load().Submit(cmd)
}

// SubmitBatch places cmds on engine e's channel; see Channel.SubmitBatch.
func (d *Driver) SubmitBatch(e abi.Engine, cmds []abi.Command) (*Pending, error) {
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	return d.channels[abi.DefaultChannel(e)].Load().SubmitBatch(cmds)
}

// Doorbells returns how many times the driver has rung a doorbell (on any
// channel) since it was created.
func (d *Driver) Doorbells() uint64 { return d.doorbells.Load() }

// Close stops the device and waits for its engines to stop. A call in
// progress — a Submit, a Wait, a submitter waiting for room in a full ring
// — returns each command's real status if the engine got to it (a DELAY
// cut short reports abi.StatusAborted), ErrClosed if it did not; later
// calls return ErrClosed. Close unpins the bounce buffers; regions from
// HostAlloc stay mapped until HostFree. When Close returns, the driver
// touches the device no more.
//
// The wait for the device to stop has a deadline (awaitStopped). Past it
// Close returns an error wrapping ErrTimeout: every channel is taken as
// removed and every waiter woken (its call returns ErrClosed, or its
// status if the engine got to it), but the bounce buffers stay
// pinned, since an engine that has not stopped may still move bytes
// through them, and the interrupt thread ends only when the device stops.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.regs.Store(abi.RegControl, abi.ControlStop)
	for e := range abi.Engine(abi.NumEngines) {
		d.hw.WakeEngine(e) // a sleeping engine must wake to see the stop
	}
	if err := d.awaitStopped(); err != nil {
		for _, ch := range d.liveChannels() {
			ch.removed.Store(true) // the driver serves it no more: its waiters return ErrClosed
			ch.timeline.wakeAll()
		}
		d.stopFaults()
		d.stopUnpin() // managed.go
		return err
	}
	// The device raised IrqCauseStopped as it stopped, and the interrupt
	// thread wakes every blocked waiter when it takes it; this makes sure
	// of it before the thread goes away.
	for _, ch := range d.liveChannels() {
		ch.timeline.wakeAll()
	}
	d.awaitIRQ()
	d.stopFaults()
	d.stopUnpin() // managed.go
	d.closeBounce()
	return nil
}

// stopped reports whether the device has stopped: every engine is done,
// and every completion it will ever publish is published.
func (d *Driver) stopped() bool { return d.regs.Load(abi.RegDeviceState) == abi.DeviceStopped }

// awaitStopped waits until the device has stopped. The engines stop at the
// end of the command they are running, so this is one command long at most
// (a DELAY is cut short), and never longer than a command's bound
// (bound.go): past it, ErrTimeout.
func (d *Driver) awaitStopped() error {
	var bound time.Duration
	for e := range abi.Engine(abi.NumEngines) {
		bound = max(bound, d.commandBound(e))
	}
	if spinBounded(d.stopped, bound) != nil {
		var hung []abi.Engine
		for e := range abi.Engine(abi.NumEngines) {
			if d.regs.Load(abi.EngineStatusPage(e)+abi.RegEngineState) != abi.EngineStopped {
				hung = append(hung, e)
			}
		}
		return fmt.Errorf("%w: the device did not stop within %v (engines still running: %v)", ErrTimeout, bound, hung)
	}
	return nil
}

// Alloc reserves size bytes of device memory and returns their address.
func (d *Driver) Alloc(size uint64) (uint64, error) {
	if d.closed.Load() {
		return 0, ErrClosed
	}
	return d.allocMemory(size, func() (uint64, error) { return d.alloc.Alloc(size) })
}

// Free returns an allocation made by Alloc. The memory is handed out again
// only after the commands queued before the Free have run (deferred.go).
func (d *Driver) Free(addr uint64) error {
	if d.closed.Load() {
		return ErrClosed
	}
	_, err := d.freeMemory(addr)
	return err
}

// MemoryInUse reports the bytes currently allocated, counting freed memory
// that commands queued before its free may still name, and leaving out
// the channels' engine-context save areas (ContextSaveInUse).
func (d *Driver) MemoryInUse() uint64 {
	d.reclaimFreed()
	return d.alloc.InUse() - d.ctxSaves.inUse.Load()
}

// ContextSaveInUse reports the bytes of device memory the open channels'
// engine-context save areas hold (ctxsave.go).
func (d *Driver) ContextSaveInUse() uint64 { return d.ctxSaves.inUse.Load() }

// ContextSaveSize is the device memory each channel's engine-context save
// area takes (RegContextSize): a channel's cost in memory, beside its id.
func (d *Driver) ContextSaveSize() uint64 { return d.ctxSaves.size }

// MemorySize reports the bytes of device memory the driver can allocate:
// all of it but the page-table pool (vm.go).
func (d *Driver) MemorySize() uint64 { return d.vm.dataSize }

// Now reads the device clock: cycles (nanoseconds) since the device was
// opened.
func (d *Driver) Now() uint64 { return d.regs.Load(abi.RegTimestamp) }

// Closed reports whether Close has been called.
func (d *Driver) Closed() bool { return d.closed.Load() }
