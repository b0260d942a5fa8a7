package device

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/futex"
	"softgpu/stage9-chardev/mmio"
)

// This file is this stage's mechanism on the device's side: the memory a
// client in another process may map. Everything a driver shares with the
// device was already memory — registers, rings, completions — and the
// register space was already cut into 4 KiB pages of one class each
// (abi/registers.go). So sharing it needs no new protocol, only the
// memory to live where another process can map it, page by page — which
// it does in a device opened with Config.Shared:
//
//	register space   one private anonymous mapping of abi.RegSpaceSize
//	                 bytes, with these pages replaced (MAP_FIXED) by
//	                 shared ones:
//	  the public pages   the global page and every engine's status page,
//	                     from one memfd for the device's life. A client
//	                     maps it read-only: identity, device state, and
//	                     RegNeedWakeup, which the doorbell handshake reads.
//	  a channel's pages  while a client owns the channel: its doorbell
//	                     (user) page from the channel's user memfd, its
//	                     status (read-only) page from its status memfd.
//	rings            one private anonymous mapping holding every channel's
//	                 submission ring and completion ring, each rounded up
//	                 to whole pages, with a shared channel's two replaced
//	                 by the rest of its user memfd (the submission ring)
//	                 and of its status memfd (the completion ring).
//
// The device keeps every address for its life: the engines hold slices of
// the rings and words of the register space, and sharing or unsharing a
// channel swaps the physical pages under those addresses, as an IOMMU
// remaps a page without the device noticing. (The swap is mmap with
// MAP_FIXED over the old pages; the kernel does it atomically for the
// range.) A channel is shared by Share while it is on no runlist, so that
// no engine touches its pages during the swap, and handed back to private
// memory by Unshare when it has left its runlist; from then on the client's
// mapping still works, but names pages the device no longer reads. That is
// what makes a client's channel its own: it holds the only memory the
// engines read its commands from, and when it lets the channel go, nothing
// it writes reaches the next owner.
//
// Every memfd the device hands out is sealed against shrinking and growing
// (F_SEAL_SHRINK, F_SEAL_GROW): a client that truncated one would
// otherwise turn the engines' next load from it into SIGBUS in the device's
// process. A status memfd is handed out read-only (a descriptor reopened
// O_RDONLY), so a client cannot write its completions or its fence; a
// public memfd likewise.
//
// Every page of a channel's two memfds is the client's: the device
// allocates none. Share maps the new files, all hole, and writes
// nothing to them (a mapping allocates no page); the client touches
// every page of both from its own process, which allocates them there,
// charged to it; and Start, before the channel is listed, refuses a file
// with a hole, seals the user file so that no hole can be punched in it
// again (the status file was sealed so at Share), and only then writes
// the channel's starting state into pages that are there. A page the
// device wrote into a hole would be the device's, and a client may keep
// the pages of a memfd after the file has gone (splice(2) into a pipe
// holds them): it would be keeping the device's memory.

// pageSize is the host's page: the unit of every mapping here.
var pageSize = uint64(os.Getpagesize())

// roundPage rounds n up to whole pages.
func roundPage(n uint64) uint64 { return (n + pageSize - 1) &^ (pageSize - 1) }

// SlotsSize and CompletionsSize are the bytes of one channel's submission
// and completion rings for ringSize entries, each rounded up to whole
// pages: the sizes a client maps after the first page of a channel's user
// and status memfds.
func SlotsSize(ringSize uint64) uint64 { return roundPage(ringSize * abi.CommandSize) }

// CompletionsSize: see SlotsSize.
func CompletionsSize(ringSize uint64) uint64 {
	return roundPage(ringSize * abi.CompletionWords * 8)
}

// PublicSize is the size of the public memfd: the global page, then one
// status page per engine.
const PublicSize = (1 + abi.NumEngines) * abi.RegPageSize

// memory is the device's shareable memory: the register space and the
// rings, each one mapping for the device's life.
type memory struct {
	regs   []byte // abi.RegSpaceSize bytes
	rings  []byte // NumChannels × (SlotsSize + CompletionsSize)
	public *os.File
	shared [abi.NumChannels]atomic.Bool // a client holds the channel's pages
}

// sharedMemory maps the register space and the rings, and the public
// memfd over the public pages.
func sharedMemory(ringSize uint64) (*memory, error) {
	if err := checkWaitv(); err != nil { // its engines sleep in futex_waitv (kick.go)
		return nil, err
	}
	m := &memory{}
	var err error
	if m.regs, err = anonymous(abi.RegSpaceSize); err != nil {
		return nil, err
	}
	perChannel := SlotsSize(ringSize) + CompletionsSize(ringSize)
	if m.rings, err = anonymous(abi.NumChannels * perChannel); err != nil {
		unix.Munmap(m.regs)
		return nil, err
	}
	if m.public, err = sealedMemfd("softgpu-public", PublicSize); err == nil {
		err = mapFixed(m.regs[abi.GlobalPage:abi.GlobalPage+abi.RegPageSize], m.public, 0)
	}
	if err == nil {
		engines := abi.EngineStatusPage(0)
		err = mapFixed(m.regs[engines:engines+abi.NumEngines*abi.RegPageSize], m.public, abi.RegPageSize)
	}
	if err == nil {
		err = sealReadOnly(m.public) // after the device's writable mappings: no client's reopen writes it
	}
	if err != nil {
		m.unmap()
		return nil, err
	}
	return m, nil
}

// unmap gives every mapping and the public memfd back.
func (m *memory) unmap() {
	if m.public != nil {
		m.public.Close()
	}
	for _, b := range [][]byte{m.regs, m.rings} {
		if b != nil {
			unix.Munmap(b)
		}
	}
}

// ErrShared reports a Share of a channel that is on a runlist or already
// shared, or an Unshare of one that is not shared.
var ErrShared = errors.New("softgpu: channel sharing refused")

// ChannelFiles are the memfds of a shared channel, as a client maps them
// (the layouts are in package uapi): User, read-write, holds the doorbell
// page and then the submission ring; Status, read-only, holds the status
// page and then the completion ring.
type ChannelFiles struct {
	User, Status *os.File
}

// Public returns a read-only descriptor of the public pages (the global
// page, then each engine's status page), for a client to map. The caller
// closes it.
func (d *Device) Public() (*os.File, error) {
	if d.shm == nil {
		return nil, errNotShared
	}
	return reopenReadOnly(d.shm.public)
}

// errNotShared is what sharing a device opened without Config.Shared gives.
var errNotShared = fmt.Errorf("%w: the device was opened without Config.Shared", ErrShared)

// ANCHOR: share

// Share moves channel c's doorbell page, status page and rings into two new
// memfds and returns them, for the daemon to pass to the client that opens
// c. The channel must be on no runlist: the driver calls Share between
// choosing the channel and listing it. The memfds are all hole, and stay
// so until the client populates them: Share writes none of their pages,
// and the channel may be listed only after Start, which writes what the
// pages held — the doorbell at the ring's head, the fence timeline, the
// completions — once the client has allocated every one.
//
// vector, if not nil, is the channel's own interrupt vector: a fence
// interrupt of c calls it instead of raising the device's line, as an
// MSI-X vector routed to an eventfd (KVM's irqfd, vhost's call fd) reaches
// the process that waits without passing through the driver. The daemon
// passes FenceVector(c), which wakes the client's waiters where they
// sleep. It is called on the engine's goroutine and must not block. (A
// fault of the channel still raises the line: the daemon's driver must
// hear of that.)
func (d *Device) Share(c abi.Channel, vector func()) (ChannelFiles, error) {
	if d.shm == nil {
		return ChannelFiles{}, errNotShared
	}
	if !c.Valid() || d.owner[c].Load() != 0 || d.shm.shared[c].Load() {
		return ChannelFiles{}, fmt.Errorf("%w: %v is on a runlist or already shared", ErrShared, c)
	}
	ringSize := d.cfg.RingSize
	bell, status, ring, compl := d.channelPages(c)
	user, err := sealedMemfd(fmt.Sprintf("softgpu-ch%d-user", c), abi.RegPageSize+SlotsSize(ringSize))
	if err != nil {
		return ChannelFiles{}, err
	}
	stat, err := sealedMemfd(fmt.Sprintf("softgpu-ch%d-status", c), abi.RegPageSize+CompletionsSize(ringSize))
	if err != nil {
		user.Close()
		return ChannelFiles{}, err
	}
	fail := func(err error) (ChannelFiles, error) {
		user.Close()
		stat.Close()
		return ChannelFiles{}, err
	}
	// Put the files' pages where the old ones were, writing nothing:
	// what the old ones held is written again by Start, into the
	// client's pages.
	for _, m := range []struct {
		dst []byte
		f   *os.File
		off uint64
	}{{bell, user, 0}, {ring, user, abi.RegPageSize}, {status, stat, 0}, {compl, stat, abi.RegPageSize}} {
		if err := mapFixed(m.dst, m.f, m.off); err != nil {
			d.privatise(c) // whatever was swapped goes back to private pages
			return fail(err)
		}
	}
	if err := sealReadOnly(stat); err != nil { // after the device's writable mapping, before the client's descriptor
		d.privatise(c)
		return fail(err)
	}
	// The user file is left with no seal but its size's until Start,
	// which adds F_SEAL_FUTURE_WRITE once the client's writable mapping
	// has populated it.
	ro, err := reopenReadOnly(stat)
	if err != nil {
		d.privatise(c)
		return fail(err)
	}
	stat.Close() // the device's mapping keeps the pages; the client gets the read-only descriptor
	if vector != nil {
		d.vectors[c].Store(&vector)
	}
	d.shm.shared[c].Store(true)
	return ChannelFiles{User: user, Status: ro}, nil
}

// ANCHOR_END: share

// ErrHole reports a Start of a shared channel one of whose memfds has a
// page its client has not populated.
var ErrHole = errors.New("softgpu: a channel's memfd has a hole")

// ANCHOR: start

// Start readies shared channel c, on no runlist, to be listed: the
// driver calls it (through ChannelOptions.Start) before it lists the
// channel. files are the memfds Share returned. Every page of both must
// be there, allocated by the client: a file with a hole gets ErrHole,
// and the channel stays unstarted, its files as they were, for the
// client to populate and start again. Then Start seals the user file
// F_SEAL_FUTURE_WRITE — its mappings made before keep writing, the
// device's and the client's, but no hole can be punched in it from now
// on, by anyone (the status file has been so since Share) — and looks
// for a hole in it once more: one punched between the first look and the
// seal gets ErrHole too (the client may still fill it, through a mapping
// made before the seal or by a load through a new read-only one, and
// start again). Then Start writes the state a channel starts from, where
// Share used to copy it: the doorbell page cleared and its doorbell at
// the head, the status page and the completion ring reset from the head
// (handover.go). Those pages exist, so the device allocates nothing.
func (d *Device) Start(c abi.Channel, files ChannelFiles) error {
	if d.shm == nil {
		return errNotShared
	}
	if !c.Valid() || d.owner[c].Load() != 0 || !d.shm.shared[c].Load() {
		return fmt.Errorf("%w: %v is on a runlist or not shared", ErrShared, c)
	}
	for _, f := range []*os.File{files.User, files.Status} {
		if err := noHole(f); err != nil {
			return err
		}
	}
	if err := sealPopulated(files.User); err != nil {
		return err
	}
	if err := noHole(files.User); err != nil { // a punch that raced the seal; the status file has been sealed since Share
		return err
	}
	bell, _, _, _ := d.channelPages(c)
	clear(bell) // on no runlist: no engine reads it
	head := d.chans[c].head
	d.regs.Store(abi.DoorbellPage(c)+abi.RegDoorbell, head)
	d.resetHandedOver(c, head)
	return nil
}

// ANCHOR_END: start

// noHole returns ErrHole if f has a hole: SEEK_HOLE from 0 finds one
// before the end. It reads no page, so allocates none.
func noHole(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("softgpu: %s: %w", f.Name(), err)
	}
	hole, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
	runtime.KeepAlive(f)
	if err != nil {
		return fmt.Errorf("softgpu: SEEK_HOLE in %s: %w", f.Name(), err)
	}
	if hole < st.Size() {
		return fmt.Errorf("%w at byte %d of %s's %d", ErrHole, hole, f.Name(), st.Size())
	}
	return nil
}

// ANCHOR: fencevector

// FenceVector returns the vector for channel c that wakes every thread
// sleeping on c's fence word — RegFence in its status page — in any
// process that maps the page: a client's blocked waiter sleeps there,
// in the kernel, on the very word the engine has just stored (package
// futex), so the engine's one system call is the whole way from the
// fence to the waiter, with no thread of either process in between.
// The engine calls it only after storing the fence and finding the
// channel armed, the order the waiter's side of the handshake relies on
// (driver/fence.go, sleep).
func (d *Device) FenceVector(c abi.Channel) func() {
	word := d.regs.Word(abi.ChannelStatusPage(c) + abi.RegFence)
	return func() { futex.Wake(word) }
}

// ANCHOR_END: fencevector

// Unshare gives channel c private pages again, after the client that held
// it is done with it: it has left its runlist (the driver's Close returned),
// so no engine touches its pages. Nothing of them carries over: the
// doorbell page, which the client wrote, is reset to the ring's head, as
// the engine left it, with the interrupt disarmed; the status page and
// the completion ring, which the engine wrote while the client's work
// ran, are reset from that head too (handover.go): the next owner starts
// from a state the device chose, whatever the last one stored and
// whatever the engine did. The client's mappings stay valid, but name
// memory the device no longer reads.
func (d *Device) Unshare(c abi.Channel) error {
	if d.shm == nil {
		return errNotShared
	}
	if !c.Valid() || d.owner[c].Load() != 0 || !d.shm.shared[c].Load() {
		return fmt.Errorf("%w: %v is on a runlist or not shared", ErrShared, c)
	}
	d.vectors[c].Store(nil)
	d.privatise(c)
	d.shm.shared[c].Store(false)
	return nil
}

// ANCHOR: privatise

// privatise maps fresh private pages over channel c's four ranges and
// fills them with a state the device chooses from the engine's head
// alone (handover.go), forgetting whatever the last owner stored and
// whatever the engine left. The owner load in the callers orders the
// last engine's writes to d.chans[c] before the read of head here.
func (d *Device) privatise(c abi.Channel) {
	bell, status, ring, compl := d.channelPages(c)
	for _, b := range [][]byte{bell, ring, status, compl} {
		if err := mapFixed(b, nil, 0); err != nil {
			// Replacing a mapping of the device's own range with anonymous
			// memory fails only if the kernel is out of memory for page
			// tables; the device cannot run on with a hole in its rings.
			panic(fmt.Sprintf("device: invariant broken: remapping %v's pages: %v", c, err))
		}
	}
	head := d.chans[c].head
	d.regs.Store(abi.DoorbellPage(c)+abi.RegDoorbell, head)
	// The fence timeline holds whatever the client's commands named as
	// their fence — the engine writes it as given — so it goes back to
	// the head with the rest of the status page. Left as the client set
	// it, a timeline far ahead would make the next owner's waits return
	// before their commands had run.
	d.resetHandedOver(c, head)
}

// ANCHOR_END: privatise

// channelPages returns channel c's doorbell page, status page, submission
// ring and completion ring as the device maps them, each a whole number
// of pages.
func (d *Device) channelPages(c abi.Channel) (bell, status, ring, compl []byte) {
	ringSize := d.cfg.RingSize
	b, s := abi.DoorbellPage(c), abi.ChannelStatusPage(c)
	slots, cs := SlotsSize(ringSize), CompletionsSize(ringSize)
	base := uint64(c) * (slots + cs)
	return d.shm.regs[b : b+abi.RegPageSize], d.shm.regs[s : s+abi.RegPageSize],
		d.shm.rings[base : base+slots], d.shm.rings[base+slots : base+slots+cs]
}

// anonymous maps size bytes of private zeroed memory.
func anonymous(size uint64) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap of %d bytes: %w", ErrNoMemory, size, err)
	}
	return b, nil
}

// sealedMemfd creates a memfd of size zeroed bytes whose size can never
// change again. Its other seals are its caller's to add (sealReadOnly,
// sealPopulated) once the device has mapped it.
func sealedMemfd(name string, size uint64) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("softgpu: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("softgpu: sizing %s: %w", name, err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		f.Close()
		return nil, fmt.Errorf("softgpu: sealing %s: %w", name, err)
	}
	return f, nil
}

// ANCHOR: sealreadonly

// sealReadOnly makes a memfd the device has already mapped writable
// read-only for everyone else, for good. A read-only descriptor alone is
// not: /proc/self/fd/N reopens the same file O_RDWR, and a shared
// writable mapping of that writes the device's pages. F_SEAL_FUTURE_WRITE
// refuses every new writable mapping and every write(2), whoever opens
// the file, and leaves the mappings made before it (the device's)
// writable; F_SEAL_SEAL then refuses any change of seals.
func sealReadOnly(f *os.File) error {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("softgpu: sealing %s read-only: %w", f.Name(), err)
	}
	return nil
}

// ANCHOR_END: sealreadonly

// sealPopulated seals a started channel's user memfd as sealReadOnly
// seals the status memfd: F_SEAL_FUTURE_WRITE, which refuses a hole
// punch (fallocate, MADV_REMOVE) and a new writable mapping to everyone,
// while the mappings made before it — the device's, and the client's own
// that populated the file — go on writing; then F_SEAL_SEAL. (Neither
// F_SEAL_WRITE, which would stop those mappings, nor anything else
// can be added after.) A client that sealed the file F_SEAL_SEAL before
// Start could keep the device's seal out; its file is accepted only if
// it carries F_SEAL_FUTURE_WRITE already.
func sealPopulated(f *os.File) error {
	err := sealReadOnly(f)
	if err == nil {
		return nil
	}
	if seals, gerr := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); gerr == nil && seals&unix.F_SEAL_FUTURE_WRITE != 0 {
		return nil
	}
	return err
}

// reopenReadOnly returns a new read-only descriptor of f's file: a client
// given it can map the pages only without PROT_WRITE.
func reopenReadOnly(f *os.File) (*os.File, error) {
	ro, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("softgpu: reopening %s read-only: %w", f.Name(), err)
	}
	runtime.KeepAlive(f)
	return ro, nil
}

// keepMapped ties the lifetime of the device's shared memory to the
// register space that reads it: the mappings are given back when nothing
// can reach the registers any more, not at Close — a driver may still
// read RegDeviceState after the device has stopped, and a Go program
// faults, not errs, on a load from an unmapped page.
func keepMapped(regs *mmio.Registers, m *memory) {
	runtime.AddCleanup(regs, func(m *memory) { m.unmap() }, m)
}
