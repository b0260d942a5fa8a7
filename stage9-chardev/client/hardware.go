package client

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/futex"
	"softgpu/stage9-chardev/mmio"
	"softgpu/stage9-chardev/trace"
	"softgpu/stage9-chardev/uapi"
)

// hardware is the device as a client process sees it: the driver's
// Hardware interface (driver/hardware.go), served from the pages the
// daemon shared instead of from a device in this process.
//
// The register space is reserved whole, at the size and with the offsets
// it has in the daemon, but inaccessible (PROT_NONE); then the pages the
// client may see are mapped into it at their own offsets:
//
//	the global page and each engine's status page   public memfd, read-only
//	each of its channels' doorbell page             user memfd, read-write
//	each of its channels' status page               status memfd, read-only
//
// So the channel code in package driver runs unchanged — it loads and
// stores the same offsets — and a load of any other page, the privileged
// ones above all, is a segmentation fault in this process, not a read of
// the daemon's memory: there is nothing there to read. The rings are
// mapped separately, from the rest of the same two memfds.
type hardware struct {
	space []byte // abi.RegSpaceSize bytes: the reservation
	regs  *mmio.Registers
	base  time.Time // a moment, by Go's monotonic clock…
	at    uint64    // …and the device clock then

	mu      sync.Mutex
	rings   map[abi.Channel]rings
	retired [][]byte // ring mappings of closed channels, kept readable until the client closes

	irq     chan struct{} // the Interrupts line
	irqFile *os.File      // the irq eventfd: the daemon writes it
	kicks   atomic.Uint64 // Wake and WakeEngine calls: doorbells that found an engine asleep
}

// rings are one channel's two rings, mapped.
type rings struct {
	slots []byte // the user memfd from UserRingOffset: read-write
	compl []byte // the status memfd from StatusCompletionsOffset: read-only
	words []atomic.Uint64
}

// newHardware reserves the register space and maps the public pages into
// it; irq is the eventfd ATTACH passed, which it takes over.
func newHardware(public, irq *os.File, epoch uint64) (*hardware, error) {
	space, err := unix.Mmap(-1, 0, abi.RegSpaceSize, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("softgpu: reserving the register space: %w", err)
	}
	h := &hardware{space: space, rings: map[abi.Channel]rings{}, irq: make(chan struct{}, 1), irqFile: irq}
	var ts unix.Timespec
	h.base = time.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	h.at = uint64(ts.Nano()) - epoch
	engines := abi.EngineStatusPage(0)
	if err := mapOver(space[abi.GlobalPage:abi.GlobalPage+abi.RegPageSize], public, uapi.PublicGlobalOffset, false); err != nil {
		unix.Munmap(space)
		return nil, err
	}
	if err := mapOver(space[engines:engines+abi.NumEngines*abi.RegPageSize], public, uapi.PublicEngineOffset(0), false); err != nil {
		unix.Munmap(space)
		return nil, err
	}
	if got := h.load(abi.RegID); got != abi.DeviceID {
		unix.Munmap(space)
		return nil, fmt.Errorf("%w: the public page's RegID reads %#x", ErrNotSoftgpu, got)
	}
	words := asWords(space)
	h.regs = mmio.NewRegisters(words, h.now)
	runtime.AddCleanup(h.regs, func(m [][]byte) {
		for _, b := range m {
			unix.Munmap(b)
		}
	}, [][]byte{space})
	go h.irqLoop()
	return h, nil
}

// ErrNotSoftgpu reports a node whose daemon's pages do not identify a
// softgpu.
var ErrNotSoftgpu = errors.New("softgpu: the node is not a softgpu")

// load reads a register before the Registers exist.
func (h *hardware) load(off uint64) uint64 {
	return asWords(h.space[off : off+8])[0].Load()
}

// now is the device clock: RegTimestamp is not a stored word, so a
// client computes it from the epoch ATTACH gave. CLOCK_MONOTONIC is read
// once, with the syscall; after that the offset from Go's own monotonic
// clock (the same CLOCK_MONOTONIC, read through the vDSO, without a
// syscall) gives the time.
func (h *hardware) now() uint64 { return h.at + uint64(time.Since(h.base)) }

// ANCHOR: mapchannel

// mapChannel maps channel c's pages into the register space and its
// rings beside it, and allocates every page of both memfds from this
// process, which CHANNEL_START requires (uapi.ChannelStart): the daemon
// handed them out all hole, so that no page of them is the daemon's.
func (h *hardware) mapChannel(c abi.Channel, user, status *os.File, ringSize uint64) error {
	bell, stat := abi.DoorbellPage(c), abi.ChannelStatusPage(c)
	slotsLen := roundPage(ringSize * abi.CommandSize)
	complLen := roundPage(ringSize * abi.CompletionWords * 8)
	if err := mapOver(h.space[bell:bell+abi.RegPageSize], user, uapi.UserDoorbellOffset, true); err != nil {
		return err
	}
	if err := mapOver(h.space[stat:stat+abi.RegPageSize], status, uapi.StatusPageOffset, false); err != nil {
		h.unmapPages(c)
		return err
	}
	slots, err := unix.Mmap(int(user.Fd()), uapi.UserRingOffset, int(slotsLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		h.unmapPages(c)
		return fmt.Errorf("softgpu: mapping %v's ring: %w", c, err)
	}
	compl, err := unix.Mmap(int(status.Fd()), uapi.StatusCompletionsOffset, int(complLen), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(slots)
		h.unmapPages(c)
		return fmt.Errorf("softgpu: mapping %v's completions: %w", c, err)
	}
	// A store to each page of the user memfd and a load from each page of
	// the status memfd, which a read-only mapping allows: the kernel
	// allocates a page for either fault, in this process's memory.
	for _, p := range []struct {
		pages  []byte
		advice int
	}{{h.space[bell : bell+abi.RegPageSize], unix.MADV_POPULATE_WRITE}, {slots, unix.MADV_POPULATE_WRITE},
		{h.space[stat : stat+abi.RegPageSize], unix.MADV_POPULATE_READ}, {compl, unix.MADV_POPULATE_READ}} {
		if err := unix.Madvise(p.pages, p.advice); err != nil {
			unix.Munmap(slots)
			unix.Munmap(compl)
			h.unmapPages(c)
			return fmt.Errorf("softgpu: populating %v's pages: %w", c, err)
		}
	}
	words := asWords(compl)[:ringSize*abi.CompletionWords]
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rings[c] = rings{slots: slots[:ringSize*abi.CommandSize], compl: compl, words: words}
	return nil
}

// ANCHOR_END: mapchannel

// unmapChannel forgets closed channel c, which has left its engine: the
// daemon has taken it off its runlist — the engine completed what it left
// with StatusRemoved — and handed the device private pages in place of
// its memfds. What the client wrote, the doorbell page and the submission
// ring, becomes private zero pages rather than holes: a waiter settling
// as the channel closes still stores its arm registers there, into memory
// no one reads. What the device wrote, the status page and the completion
// ring, stays as it is, holding its final state — private copies, if
// letGo made them, else the memfds the device no longer writes — so a
// Pending of the closed channel reads what became of its commands: a
// completion with its status, a fence that signalled, or "not yet", never
// the zeroes that read "command 0 completed, StatusOK". The ring mappings
// are kept until the client closes, for the same reason.
func (h *hardware) unmapChannel(c abi.Channel) {
	h.mu.Lock()
	r, ok := h.rings[c]
	delete(h.rings, c)
	if ok {
		h.retired = append(h.retired, r.slots[:cap(r.slots)], r.compl)
	}
	h.mu.Unlock()
	if ok {
		zeroOver(r.slots[:cap(r.slots)])
	}
	bell := abi.DoorbellPage(c)
	zeroOver(h.space[bell : bell+abi.RegPageSize])
}

// letGo replaces closed channel c's status page and completion ring, as
// the client maps them, with private copies at the same addresses
// (copyOver), once CHANNEL_CLOSE has succeeded: the device writes neither
// any more, so what they hold is final. With unmapChannel after it, the
// client then holds nothing of the channel's memfds, which the daemon
// counts against its quota for as long as anyone holds one of its files
// (server/linger.go). On an error the memfd stays mapped, as before there
// were copies: nothing is lost but that quota.
//
// A waiter asleep on the fence word through the copy sleeps on the
// memfd's page, where no wake comes any more; it looks again at its
// sleep timeout, as one about to sleep when a fault's wake went by does
// (driver/client.go, sleep). The channel's removed commands had their
// fences written before CHANNEL_CLOSE returned, which woke such waiters.
func (h *hardware) letGo(c abi.Channel) {
	h.mu.Lock()
	r, ok := h.rings[c]
	h.mu.Unlock()
	stat := abi.ChannelStatusPage(c)
	if copyOver(h.space[stat:stat+abi.RegPageSize]) == nil && ok {
		copyOver(r.compl)
	}
}

// unmapPages puts zero pages over channel c's two register pages: a
// channel whose mapping failed part way, whose pages hold nothing yet.
func (h *hardware) unmapPages(c abi.Channel) {
	bell, stat := abi.DoorbellPage(c), abi.ChannelStatusPage(c)
	zeroOver(h.space[bell : bell+abi.RegPageSize])
	zeroOver(h.space[stat : stat+abi.RegPageSize])
}

// The driver.Hardware methods.

func (h *hardware) Registers() *mmio.Registers { return h.regs }

// Memory is nil: device memory is the daemon's. The channel half of the
// driver never needs it.
func (h *hardware) Memory() []byte { return nil }

func (h *hardware) Ring(c abi.Channel) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rings[c].slots
}

func (h *hardware) Completions(c abi.Channel) []atomic.Uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rings[c].words
}

func (h *hardware) Interrupts() <-chan struct{} { return h.irq }

func (h *hardware) Trace() *trace.Buffer { return nil }

// errPrivileged is what the device-wide calls of Hardware return in a
// client: they are the daemon's.
var errPrivileged = errors.New("softgpu: the DMA window is the daemon's; a client registers memory with HostAlloc")

func (h *hardware) RegisterHost([]byte) error   { return errPrivileged }
func (h *hardware) UnregisterHost([]byte) error { return errPrivileged }

// ANCHOR: clientkick

// Wake kicks the engine serving c, which said it needs waking
// (RegNeedWakeup): a store into shared memory wakes no thread. The engine
// of a daemon since 2.2 sleeps in the kernel on c's doorbell word, among others
// (device/kick.go), so the kick is a FUTEX_WAKE on that word, through this
// process's mapping of the doorbell page — shared, not FUTEX_PRIVATE: the
// kernel keys it by the memfd's page, which the daemon's engine sleeps on
// through its own mapping. It is C3 of the handshake drawn in kick.go:
// the driver calls it after storing the tail (C1) and loading
// RegNeedWakeup as 1 (C2, driver/idle.go).
func (h *hardware) Wake(c abi.Channel) {
	h.kicks.Add(1)
	h.mu.Lock()
	_, mapped := h.rings[c]
	h.mu.Unlock()
	if mapped {
		futex.Wake(h.regs.Word(abi.DoorbellPage(c) + abi.RegDoorbell))
	}
}

// ANCHOR_END: clientkick

// WakeEngine kicks engine e whichever of this client's channels it
// serves: every one of them is kicked, and a kick of a channel on the
// other engine costs that engine one look at its runlist.
func (h *hardware) WakeEngine(abi.Engine) {
	h.kicks.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.rings {
		futex.Wake(h.regs.Word(abi.DoorbellPage(c) + abi.RegDoorbell))
	}
}

// irqLoop turns the daemon's writes of the irq eventfd into tokens on the
// Interrupts line, and closes the line when the eventfd is closed.
func (h *hardware) irqLoop() {
	defer close(h.irq)
	var b [8]byte
	for {
		if _, err := h.irqFile.Read(b[:]); err != nil {
			return
		}
		select {
		case h.irq <- struct{}{}:
		default: // a token is pending: the handler will look at every channel anyway
		}
	}
}

// close ends the interrupt line; the mappings go when
// nothing can reach the registers (the cleanup in newHardware), since a
// Pending may outlive the client.
func (h *hardware) close() {
	h.irqFile.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.rings {
		h.retired = append(h.retired, r.slots[:cap(r.slots)], r.compl)
	}
	retired := h.retired
	runtime.AddCleanup(h.regs, func(m [][]byte) {
		for _, b := range m {
			unix.Munmap(b)
		}
	}, retired)
}

// roundPage rounds n up to whole pages.
func roundPage(n uint64) uint64 {
	page := uint64(os.Getpagesize())
	return (n + page - 1) &^ (page - 1)
}
