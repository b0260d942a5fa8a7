// Package client is how an application reaches a softgpu served by
// softgpud: the same API as an in-process GPU (package softgpu), across a
// process boundary.
//
//	gpu, err := client.Dial("")                 // the default node
//	buf, _ := gpu.Alloc(1 << 20)
//	gpu.Fill(buf, 1<<20, 7)                     // stores into a mapped ring, a store to a mapped doorbell
//	gpu.Close()
//
// Dial makes the control calls of package uapi — VERSION, ATTACH, one
// CHANNEL_OPEN per engine — and maps what they return: the public pages,
// each channel's doorbell page and rings, its status page and
// completions. From then on a command is submitted exactly as in-process,
// by the same code (driver.Channel): stores into the ring, a store to the
// doorbell, and, only if the engine said it is asleep, a FUTEX_WAKE of
// the doorbell word. A wait polls the fence in the mapped status page and then
// sleeps on it, in the kernel, until the engine wakes it (a futex on the
// fence word). Neither sends a message. Allocation, host
// memory registration and channels are control calls, one message each
// way.
//
// The methods of GPU are those of softgpu.GPU that make sense outside the
// daemon, with the same signatures (a test holds them to it); the device-
// wide ones — idle control, traces, statistics of the whole device — are
// the daemon's (softgpu-smi shows them). Channels are softgpu.Channel
// values, with every method of an in-process channel.
package client

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/uapi"
)

// The types a client shares with an in-process GPU.
type (
	Ptr            = softgpu.Ptr
	Engine         = softgpu.Engine
	Pending        = softgpu.Pending
	Channel        = softgpu.Channel
	ChannelOptions = softgpu.ChannelOptions
	Batch          = softgpu.Batch
)

// The engines.
const (
	Compute = softgpu.Compute
	Copy    = softgpu.Copy
)

// ErrGone reports that the daemon has gone: it closed the connection (it
// shut down, or died). Every call fails with it from then on, and every
// wait settles. It wraps driver.ErrClosed, which a channel's own methods
// return.
var ErrGone = fmt.Errorf("softgpu: device gone (the daemon closed the connection): %w", driver.ErrClosed)

// Config configures a client.
type Config struct {
	// Node is the daemon's node; uapi.DefaultNode() if empty.
	Node string
	// How waits wait, as in softgpu.Config; SleepTimeout as in
	// driver.Config (zero: 10 ms).
	Wait         driver.WaitMode
	PollBudget   uint64
	Wake         driver.Wake
	SleepTimeout time.Duration
	// Staging is the size of the registered buffer Write and Read copy
	// through; zero means 1 MiB.
	Staging uint64
}

// GPU is a softgpu served by a daemon.
type GPU struct {
	hw      *hardware
	cl      *driver.Client
	version uapi.Version
	context abi.Context

	*conn
	closed   atomic.Bool
	attached atomic.Pointer[driver.Client] // g.cl, for the connection's reader once it is made

	channels [abi.NumEngines]*softgpu.Channel

	// chanMu is held by NewChannel from its CHANNEL_OPEN until the channel
	// is mapped and attached, and by a channel's close from its
	// CHANNEL_CLOSE until it is unmapped: the daemon may hand a closed id
	// out again as soon as CHANNEL_CLOSE returns, and the mappings are
	// kept by id, so a NewChannel that got the id before the close had
	// unmapped it had its doorbell and rings taken by that unmapping.
	chanMu sync.Mutex

	staging uint64
	stageMu sync.Mutex
	stage   *HostBuffer
	hostMu  sync.Mutex
	hosts   []*HostBuffer

	paged pagedSet // managed allocations with a pager, each with an armed liveness socket (pager.go)
}

// Dial connects to the daemon at node (uapi.DefaultNode() if empty).
//
// Its error wraps a uapi.Errno when the daemon refused a call
// (errors.Is(err, uapi.ErrQuota), ...). uapi.ErrBusy from ATTACH says the
// daemon bars the caller's uid for a while: an engine was reset under a
// command of one of its clients, a command that never reached a
// preemption point, by the watchdog or at a preempt timeout (softgpud's
// server/hangbars.go). The daemon hangs up
// every connection of the uid at that moment, so a GPU of the uid already
// open sees ErrGone; a Dial after the bar succeeds.
func Dial(node string) (*GPU, error) { return DialConfig(Config{Node: node}) }

// DialConfig connects as cfg says.
func DialConfig(cfg Config) (*GPU, error) {
	if cfg.Node == "" {
		cfg.Node = uapi.DefaultNode()
	}
	if cfg.Staging == 0 {
		cfg.Staging = 1 << 20
	}
	g := &GPU{staging: cfg.Staging}
	c, err := dialNode(cfg.Node, func() {
		if cl := g.attached.Load(); cl != nil {
			cl.Lost()
		}
	})
	if err != nil {
		return nil, err
	}
	g.conn = c
	if err := g.open(cfg); err != nil {
		g.conn.close()
		if g.hw != nil {
			g.hw.close()
		}
		return nil, err
	}
	return g, nil
}

// open negotiates, attaches and opens a channel per engine.
func (g *GPU) open(cfg Config) error {
	g.version = uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	if _, err := g.call(&g.version, nil); err != nil {
		return versionError(g.node, err)
	}
	var at uapi.Attach
	fds, err := g.call(&at, nil)
	if err != nil {
		return fmt.Errorf("softgpu: ATTACH: %w", err)
	}
	public := os.NewFile(uintptr(fds[uapi.AttachFDPublic]), "public")
	defer public.Close()
	// Non-blocking before os.NewFile, which then uses the runtime's
	// poller: a blocked Read parks a goroutine, not a thread, and Close
	// ends it.
	unix.SetNonblock(fds[uapi.AttachFDIrq], true)
	irq := os.NewFile(uintptr(fds[uapi.AttachFDIrq]), "irq")
	// This client kicks with FUTEX_WAKE on a doorbell word, which the
	// engines of every daemon it can negotiate with (3.x; 2.2 on) sleep
	// on: the kick eventfd is for a client that makes no futex call.
	unix.Close(fds[uapi.AttachFDKick])
	g.hw, err = newHardware(public, irq, at.ClockEpoch)
	if err != nil {
		irq.Close()
		return err
	}
	g.context = abi.Context(at.Context)
	g.cl, err = driver.NewClient(g.hw, driver.Config{Wait: cfg.Wait, PollBudget: cfg.PollBudget, Wake: cfg.Wake,
		SleepTimeout: cfg.SleepTimeout})
	if err != nil {
		return err
	}
	g.attached.Store(g.cl)
	if g.gone.Load() { // lost before attached could be told
		g.cl.Lost()
	}
	for e := range abi.Engine(abi.NumEngines) {
		if g.channels[e], err = g.NewChannel(e, ChannelOptions{Priority: softgpu.PriorityNormal}); err != nil {
			return err
		}
	}
	return nil
}

// err turns an error after the daemon has gone into ErrGone.
func (g *GPU) err(err error) error {
	if err != nil && g.gone.Load() && !errors.Is(err, ErrGone) {
		return fmt.Errorf("%w (%w)", ErrGone, err)
	}
	return err
}

// Close ends the connection: the daemon stops the client's channels and
// frees everything it allocated. It is idempotent.
func (g *GPU) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	g.paged.disarmAll() // pager.go: before the daemon lets us go
	g.conn.close()
	g.hw.close()
	<-g.cl.Done()
	g.hostMu.Lock()
	for _, h := range g.hosts {
		h.unmap()
	}
	g.hosts = nil
	g.hostMu.Unlock()
	return nil
}

// NewChannel opens a channel of engine e in the client's context: a
// CHANNEL_OPEN, then its pages mapped and populated, a CHANNEL_START, and
// the channel half attached to them. Close takes it off its engine
// (CHANNEL_CLOSE).
func (g *GPU) NewChannel(e Engine, opts ChannelOptions) (*Channel, error) {
	if opts.Timeslice < 0 {
		return nil, fmt.Errorf("%w: Timeslice %v is negative", softgpu.ErrConfig, opts.Timeslice)
	}
	open := uapi.ChannelOpen{Engine: uint32(e), Priority: uint32(opts.Priority), Timeslice: uint64(opts.Timeslice)}
	g.chanMu.Lock()
	defer g.chanMu.Unlock()
	fds, err := g.call(&open, nil)
	if err != nil {
		return nil, g.err(err)
	}
	user := os.NewFile(uintptr(fds[uapi.ChannelFDUser]), "user")
	status := os.NewFile(uintptr(fds[uapi.ChannelFDStatus]), "status")
	defer user.Close()
	defer status.Close()
	id := abi.Channel(open.Channel)
	closeIt := func() error {
		_, err := g.call(&uapi.ChannelClose{Channel: uint32(id)}, nil)
		return g.err(err)
	}
	if !id.Valid() || open.RingSize == 0 || open.RingSize&(open.RingSize-1) != 0 {
		closeIt()
		return nil, fmt.Errorf("%w: CHANNEL_OPEN returned %v with rings of %d", ErrNotSoftgpu, id, open.RingSize)
	}
	if err := g.hw.mapChannel(id, user, status, uint64(open.RingSize)); err != nil {
		closeIt()
		return nil, err
	}
	if _, err := g.call(&uapi.ChannelStart{Channel: uint32(id)}, nil); err != nil {
		closeIt()
		g.hw.unmapChannel(id)
		return nil, g.err(err)
	}
	var dch *driver.Channel
	dch, err = g.cl.Attach(id, e, g.context, func() error {
		g.chanMu.Lock()
		defer g.chanMu.Unlock()
		err := closeIt()
		g.cl.Detach(dch)
		if err == nil { // the daemon has it back, and writes its pages no more
			g.hw.letGo(id)
		}
		g.hw.unmapChannel(id)
		return err
	})
	if err != nil {
		closeIt()
		g.hw.unmapChannel(id)
		return nil, g.err(err)
	}
	return softgpu.AttachChannel(dch, e), nil
}

// channel returns the client's own channel of engine e.
func (g *GPU) channel(e Engine) (*Channel, error) {
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", softgpu.ErrNoEngine, e)
	}
	return g.channels[e], nil
}

// Alloc reserves size bytes of device memory in the client's context.
func (g *GPU) Alloc(size uint64) (Ptr, error) {
	a := uapi.Alloc{Size: size}
	if _, err := g.call(&a, nil); err != nil {
		return 0, g.err(err)
	}
	return Ptr(a.VA), nil
}

// Free releases memory Alloc returned.
func (g *GPU) Free(p Ptr) error {
	_, err := g.call(&uapi.Free{VA: uint64(p)}, nil)
	return g.err(err)
}

// Fill sets size bytes at dst to value, on the copy engine.
func (g *GPU) Fill(dst Ptr, size uint64, value byte) error {
	return g.err(g.channels[Copy].Fill(dst, size, value))
}

// FillAsync is Fill without the wait.
func (g *GPU) FillAsync(dst Ptr, size uint64, value byte) (*Pending, error) {
	p, err := g.channels[Copy].FillAsync(dst, size, value)
	return p, g.err(err)
}

// Copy copies size bytes from src to dst, on the copy engine.
func (g *GPU) Copy(dst, src Ptr, size uint64) error {
	return g.err(g.channels[Copy].Copy(dst, src, size))
}

// CopyAsync is Copy without the wait.
func (g *GPU) CopyAsync(dst, src Ptr, size uint64) (*Pending, error) {
	p, err := g.channels[Copy].CopyAsync(dst, src, size)
	return p, g.err(err)
}

// Sum32 sums the 32-bit words at src into the word at dst, on the compute
// engine.
func (g *GPU) Sum32(dst, src Ptr, size uint64) error {
	return g.err(g.channels[Compute].Sum32(dst, src, size))
}

// Add32 adds addend to every 32-bit word at dst, on the compute engine.
func (g *GPU) Add32(dst Ptr, size uint64, addend uint32) error {
	return g.err(g.channels[Compute].Add32(dst, size, addend))
}

// Nop runs a command that does nothing on engine e and waits for it: a
// round trip through the rings, across the boundary.
func (g *GPU) Nop(e Engine) error {
	ch, err := g.channel(e)
	if err != nil {
		return err
	}
	return g.err(ch.Nop())
}

// Delay occupies engine e for cycles.
func (g *GPU) Delay(e Engine, cycles uint64) error {
	ch, err := g.channel(e)
	if err != nil {
		return err
	}
	return g.err(ch.Delay(cycles))
}

// NewBatch starts a batch for engine e's channel.
func (g *GPU) NewBatch(e Engine) *Batch {
	ch, err := g.channel(e)
	if err != nil {
		return softgpu.AttachChannel(nil, e).NewBatch() // as in-process: its Submit fails with ErrNoEngine
	}
	return ch.NewBatch()
}

// MemorySize returns the device memory's size.
func (g *GPU) MemorySize() uint64 { return g.version.MemorySize }

// Now returns the device clock.
func (g *GPU) Now() uint64 { return g.hw.now() }

// Context returns the id of the client's context: every command it
// submits carries it.
func (g *GPU) Context() abi.Context { return g.context }

// Kicks returns how many times the client has kicked an engine — a
// FUTEX_WAKE of a doorbell word: doorbells that found an engine asleep.
func (g *GPU) Kicks() uint64 { return g.hw.kicks.Load() }

// Doorbells returns how many doorbell stores the client has made.
func (g *GPU) Doorbells() uint64 { return g.cl.Doorbells() }

// Sleeps returns how many times a waiter of this client has been woken
// from a sleep (the driver's Stats().Wakeups): a wait that polled to the
// end of its budget and then slept on its fence word until the engine's
// futex wake (driver/client.go), or on its Go channel until the waiter on
// that word passed the wake on. A wait that saw its command complete
// while polling does not count.
func (g *GPU) Sleeps() uint64 { return g.cl.Stats().Wakeups }

func (g *GPU) String() string {
	return fmt.Sprintf("softgpu at %s (context %d, %d bytes of device memory)", g.node, g.context, g.version.MemorySize)
}
