package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/trace"
	"softgpu/stage9-chardev/uapi"
)

// client is one connection to the node, served by one goroutine (serve),
// which alone changes its state; mu guards what INFO readers and the
// eventfd goroutines read of it.
type client struct {
	s             *Server
	conn          *net.UnixConn
	pid, uid, gid uint32
	allowed       bool // its credentials passed mayConnect
	negotiated    bool // VERSION has succeeded

	ctx *driver.Context // from ATTACH; nil before

	mu      sync.Mutex
	chans   map[abi.Channel]*driver.Channel
	holds   map[abi.Channel]*held      // each open channel's files (linger.go)
	allocs  map[uint64]uint64          // VA → bytes, from ALLOC
	hosts   map[uint64]*driver.Pinned  // VA → region, from HOST_REGISTER
	managed map[uint64]*driver.Managed // VA → allocation, from MANAGED_ALLOC
	devMem  uint64
	hostMem uint64
	// unstarted holds, under mu, the daemon's descriptors of each
	// channel opened and not yet started, which CHANNEL_START checks and
	// seals (device.Start); closed at CHANNEL_START or CHANNEL_CLOSE.
	unstarted map[abi.Channel]device.ChannelFiles

	pg pagers // its managed allocations' pagers (pager.go)

	use uapi.Pools // what it holds of each pool, charged and refunded under s.quotaMu (quota.go)

	ids   atomic.Pointer[[]abi.Channel] // its channels, for the kick goroutine
	calls atomic.Uint64

	resetsJudged atomic.Uint64 // the engine resets under its context it has been struck for (hangbars.go)

	discarding atomic.Int32 // closes of descriptors it sent, begun on their own goroutines and not returned (discard.go)
	exit       *os.File     // the pidfd of its process, watched (exitwatch.go); nil if the kernel gave none

	kick  *os.File // the daemon's descriptor of the kick eventfd; read by kickLoop
	irqMu sync.RWMutex
	irqFD int // the daemon's descriptor of the irq eventfd, or -1; written by notify
}

// maxFDsRead is how many descriptors a read makes room for: the most one
// message can carry (SCM_MAX_FD in the kernel), so that a message with
// more than its call takes arrives whole, is refused with ErrFDs, and has
// its descriptors let go by discard — never truncated, which would have
// the kernel close the ones left over on serve's thread (discard.go says
// why that close may wait).
const maxFDsRead = 253

// serve reads calls and answers them until the connection ends, then
// tears the client down. Every descriptor a message brings is let go
// before the next message is read, unless a call took it over
// (discard.go says how).
func (c *client) serve() {
	defer c.teardown()
	c.exit = c.watchExit()                 // exitwatch.go: its process's exit ends it too
	buf := make([]byte, uapi.MaxMessage+1) // one byte more: a longer message sets MSG_TRUNC
	oob := make([]byte, unix.CmsgSpace(4*maxFDsRead))
	for {
		c.readDeadline() // conns.go: a client that does not attach has AttachTimeout between calls
		n, oobn, flags, _, err := c.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			if isTimeout(err) {
				c.s.log.Info("client dropped: no call and no ATTACH in time", "pid", c.pid, "uid", c.uid, "timeout", c.s.cfg.AttachTimeout)
				return
			}
			if !isClosedConn(err) {
				c.s.log.Warn("client read", "pid", c.pid, "err", err)
			}
			return
		}
		fds := uapi.ReceivedFDs(oob[:oobn])
		if n == 0 && oobn == 0 {
			return // SOCK_SEQPACKET: a zero-length read is the peer's close (an empty datagram reads the same, and drops only its sender)
		}
		c.s.messages.Add(1)
		c.calls.Add(1)
		reply, send, closeAfter := c.call(buf[:n], flags, fds)
		kept := c.discard(fds) // what a call kept, it dup'ed or mapped (discard.go: a close may wait)
		err = c.reply(reply, send)
		for _, f := range closeAfter {
			f.Close()
		}
		if err != nil {
			c.s.log.Warn("client dropped: reply not taken", "pid", c.pid, "err", err)
			return
		}
		if !kept {
			c.s.log.Warn("client dropped: too many of the descriptors it sent are slow to close", "pid", c.pid, "uid", c.uid, "max", maxDiscarding)
			return
		}
		if !c.allowed {
			return // refused: it has its ErrPerm
		}
	}
}

// call decodes one message and runs it. It returns the reply, the
// descriptors to send with it, and the files to close once sent.
func (c *client) call(msg []byte, flags int, fds []int) (reply []byte, send []int, closeAfter []*os.File) {
	var h uapi.Header
	if len(msg) >= uapi.HeaderSize {
		h = uapi.DecodeHeader(msg)
	}
	switch {
	case flags&unix.MSG_TRUNC != 0:
		return uapi.EncodeReply(h, uapi.ErrSize, nil), nil, nil
	case flags&unix.MSG_CTRUNC != 0:
		return uapi.EncodeReply(h, uapi.ErrFDs, nil), nil, nil
	case !c.allowed:
		return uapi.EncodeReply(h, uapi.ErrPerm, nil), nil, nil
	}
	h, arg, err := uapi.DecodeCall(msg, len(fds))
	if err != nil {
		c.s.log.Debug("malformed call", "pid", c.pid, "err", err)
		return uapi.EncodeReply(h, uapi.ErrnoOf(err), nil), nil, nil
	}
	send, closeAfter, err = c.dispatch(arg, fds)
	if err != nil {
		c.s.log.Debug("call failed", "pid", c.pid, "call", fmt.Sprintf("%T", arg), "err", err)
		for _, f := range closeAfter {
			f.Close()
		}
		return uapi.EncodeReply(h, errnoFor(err), nil), nil, nil
	}
	return uapi.EncodeReply(h, uapi.OK, arg), send, closeAfter
}

// reply sends one message, waiting at most the write timeout for a client
// that does not read.
func (c *client) reply(msg []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	_, _, err := c.conn.WriteMsgUnix(msg, oob, nil)
	return err
}

// dispatch runs one decoded call. It fills arg's out-fields, and returns
// the descriptors the reply carries and the files to close after it.
func (c *client) dispatch(arg uapi.Arg, fds []int) (send []int, closeAfter []*os.File, err error) {
	s := c.s
	if a, ok := arg.(*uapi.Version); ok {
		if a.Major != uapi.VersionMajor {
			why := "a major version this daemon does not know"
			if a.Major < uapi.VersionMajor {
				// What the major moved for (uapi/args.go): served, an
				// older client's channels would never run, and it would
				// hang with no error.
				why = "since 3.0 the daemon serves a channel only after CHANNEL_START, which an older client never calls"
			}
			return nil, nil, fmt.Errorf("client speaks %d.%d, the daemon %d.%d: %s: %w", a.Major, a.Minor, uapi.VersionMajor, uapi.VersionMinor, why, uapi.ErrVersion)
		}
		*a = uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor, NumEngines: abi.NumEngines,
			NumChannels: abi.NumChannels, RingSize: uint32(s.ringSize()), MemorySize: s.drv.MemorySize(), Caps: 0}
		c.negotiated = true
		return nil, nil, nil
	}
	if !c.negotiated {
		return nil, nil, uapi.ErrNotNegotiated
	}
	switch a := arg.(type) {
	case *uapi.Info:
		s.info(a, c.seesAll())
		return nil, nil, nil
	case *uapi.ClientInfo:
		return nil, nil, s.clientInfo(a, c)
	case *uapi.ClientQuota:
		return nil, nil, s.clientQuota(a, c)
	case *uapi.Attach:
		return c.attach(a)
	}
	if c.ctx == nil {
		return nil, nil, fmt.Errorf("%T before ATTACH: %w", arg, uapi.ErrNotNegotiated)
	}
	switch a := arg.(type) {
	case *uapi.ChannelOpen:
		return c.openChannel(a)
	case *uapi.ChannelClose:
		return nil, nil, c.closeChannel(abi.Channel(a.Channel))
	case *uapi.ChannelStart:
		return nil, nil, c.startChannel(abi.Channel(a.Channel))
	case *uapi.Alloc:
		return nil, nil, c.alloc(a)
	case *uapi.Free:
		return nil, nil, c.free(a.VA)
	case *uapi.HostRegister:
		return nil, nil, c.hostRegister(a, fds[uapi.HostRegisterFDMemory])
	case *uapi.HostUnregister:
		return nil, nil, c.hostUnregister(a.VA)
	case *uapi.ManagedAlloc:
		return nil, nil, c.managedAlloc(a, fds[uapi.ManagedFDMemory])
	case *uapi.ManagedSync:
		return nil, nil, c.withManaged(a.VA, (*driver.Managed).Sync)
	case *uapi.ManagedPrefetch:
		return nil, nil, c.withManaged(a.VA, func(m *driver.Managed) error {
			mig, err := m.Prefetch(a.Offset, a.Size, driver.Location(a.To))
			if err != nil {
				return fmt.Errorf("%w: %w", uapi.ErrInval, err)
			}
			return mig.Wait()
		})
	case *uapi.ManagedResident:
		return nil, nil, c.withManaged(a.VA, func(m *driver.Managed) error {
			device, remote := m.Resident()
			a.Device, a.Remote = uint32(device), uint32(remote)
			return nil
		})
	case *uapi.ManagedFree:
		return nil, nil, c.managedFree(a.VA)
	case *uapi.ManagedPager:
		return nil, nil, c.managedPager(a, fds[uapi.PagerFDUffd], fds[uapi.PagerFDLiveness])
	}
	return nil, nil, fmt.Errorf("%T: %w", arg, uapi.ErrBadRequest)
}

// ringSize is the device's ring size, from its register.
func (s *Server) ringSize() uint64 { return s.dev.Registers().Load(abi.RegRingSize) }

// attach gives the client its context and the three descriptors of the
// data path: the public pages, the kick eventfd (which only a client that
// makes no futex call writes: kickLoop), the irq eventfd.
func (c *client) attach(a *uapi.Attach) (send []int, closeAfter []*os.File, err error) {
	if c.ctx != nil {
		return nil, nil, fmt.Errorf("ATTACH twice: %w", uapi.ErrBusy)
	}
	if err := c.refuseBarred("ATTACH"); err != nil { // hangbars.go
		return nil, nil, err
	}
	pub, err := c.s.dev.Public()
	if err != nil {
		return nil, nil, err
	}
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		pub.Close()
		return nil, nil, err
	}
	irq, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		pub.Close()
		unix.Close(kick)
		return nil, nil, err
	}
	ctx, err := c.s.drv.NewContext()
	if err == nil { // charged for its root's table pages too (quota.go)
		if err = c.charge(uapi.Pools{Contexts: 1, PageTables: uint32(ctx.TablePages())}); err != nil {
			ctx.Close()
		}
	}
	if err != nil {
		pub.Close()
		unix.Close(kick)
		unix.Close(irq)
		return nil, nil, err
	}
	c.mu.Lock()
	c.ctx, c.kick = ctx, os.NewFile(uintptr(kick), "kick")
	c.chans, c.allocs, c.hosts = map[abi.Channel]*driver.Channel{}, map[uint64]uint64{}, map[uint64]*driver.Pinned{}
	c.holds = map[abi.Channel]*held{}
	c.unstarted = map[abi.Channel]device.ChannelFiles{}
	c.managed = map[uint64]*driver.Managed{}
	c.mu.Unlock()
	c.irqMu.Lock()
	c.irqFD = irq
	c.irqMu.Unlock()
	go c.kickLoop(c.kick)
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	*a = uapi.Attach{Context: uint32(ctx.ID()), ClockEpoch: uint64(ts.Nano()) - c.s.drv.Now(), PublicSize: uapi.PublicSize()}
	send = make([]int, 3)
	send[uapi.AttachFDPublic], send[uapi.AttachFDKick], send[uapi.AttachFDIrq] = int(pub.Fd()), kick, irq
	c.s.log.Info("client attached", "pid", c.pid, "uid", c.uid, "context", ctx.ID())
	if tb := c.s.trace; tb != nil {
		tb.Record(trace.Event{Kind: trace.KindAttach, Start: c.s.drv.Now(), Arg: uint64(c.pid), Seq: uint64(ctx.ID())})
	}
	return send, []*os.File{pub}, nil
}

// ANCHOR: openchannel

// openChannel opens a channel in the client's context, its pages moved
// into memfds, all hole, and leaves it unstarted: on no runlist until
// the client has populated both files and calls CHANNEL_START
// (startChannel). Nothing of the daemon touches a page of either file
// before then, so that every page of them is the client's
// (device/shared.go).
func (c *client) openChannel(a *uapi.ChannelOpen) (send []int, closeAfter []*os.File, err error) {
	switch {
	case a.Engine >= abi.NumEngines:
		return nil, nil, fmt.Errorf("engine %d: %w", a.Engine, uapi.ErrInval)
	case a.Priority > abi.MaxPriority:
		return nil, nil, fmt.Errorf("priority %d: %w", a.Priority, uapi.ErrInval)
	}
	if err := c.grantPriority(a); err != nil {
		return nil, nil, err
	}
	if err := c.refuseBarred("CHANNEL_OPEN"); err != nil { // hangbars.go: a client that attached as its uid was struck
		return nil, nil, err
	}
	c.s.linger.drain() // a closed channel whose files were let go before this call no longer counts (linger.go)
	cost := c.channelCost()
	if err := c.charge(cost); err != nil {
		if strings.Contains(err.Error(), " channels of ") { // the Channels quota (charge names the pool)
			n, uid := c.s.linger.heldClosed(c)
			if !strings.HasPrefix(err.Error(), "the client ") {
				n = uid
			}
			if n > 0 {
				err = fmt.Errorf("%w (%d of them closed, but counted until every descriptor and mapping of their memfds is gone)", err, n)
			}
		}
		return nil, nil, err
	}
	var files device.ChannelFiles
	ch, err := c.s.drv.NewChannel(abi.Engine(a.Engine), c.ctx, driver.ChannelOptions{
		Priority: uint8(a.Priority), Timeslice: a.Timeslice, Notify: c.channelNotify, // hangbars.go
		Share: func(id abi.Channel) error {
			var err error
			files, err = c.s.dev.Share(id, c.s.dev.FenceVector(id)) // its fence interrupts: straight to the client's sleeping waiters
			return err
		},
		Unshare: func(id abi.Channel) {
			if err := c.s.dev.Unshare(id); err != nil {
				c.s.log.Error("unsharing a channel that left its runlist", "channel", id, "err", err)
			}
		},
		Start: func(id abi.Channel) error { return c.s.dev.Start(id, files) },
	})
	if err != nil {
		if files.User != nil { // shared, then refused: the driver has unshared it
			files.User.Close()
			files.Status.Close()
		}
		c.refund(cost)
		return nil, nil, err
	}
	h, err := c.s.linger.watch(c, files)
	if err != nil {
		cerr := ch.Close()
		files.User.Close()
		files.Status.Close()
		c.refund(cost)
		return nil, nil, errors.Join(err, cerr)
	}
	ring := c.s.ringSize()
	*a = uapi.ChannelOpen{Engine: a.Engine, Priority: a.Priority, Timeslice: a.Timeslice, Channel: uint32(ch.ID()),
		RingSize: uint32(ring), UserSize: uapi.UserSize(uint32(ring)), StatusSize: uapi.StatusSize(uint32(ring))}
	c.mu.Lock()
	c.chans[ch.ID()] = ch
	c.holds[ch.ID()] = h
	c.unstarted[ch.ID()] = files // kept open for CHANNEL_START
	c.mu.Unlock()
	c.publishIDs()
	send = make([]int, 2)
	send[uapi.ChannelFDUser], send[uapi.ChannelFDStatus] = int(files.User.Fd()), int(files.Status.Fd())
	return send, nil, nil
}

// ANCHOR_END: openchannel

// ANCHOR: startchannel

// startChannel starts a channel openChannel left unstarted: the device
// seals its user file and finds no hole in either (device.Start) and
// writes its starting state, and the driver lists it. A file with a hole
// is refused with ErrInval, and the channel stays unstarted, to be
// populated and started again.
func (c *client) startChannel(id abi.Channel) error {
	c.mu.Lock()
	ch, open := c.chans[id]
	files, unstarted := c.unstarted[id]
	c.mu.Unlock()
	switch {
	case !open:
		return fmt.Errorf("%v is not a channel of this client: %w", id, uapi.ErrNoEntry)
	case !unstarted:
		return fmt.Errorf("%v is started already: %w", id, uapi.ErrBusy)
	}
	if err := ch.Start(); err != nil {
		if errors.Is(err, device.ErrHole) {
			return fmt.Errorf("%v: populate the channel's files before CHANNEL_START: %w: %w", id, err, uapi.ErrInval)
		}
		return err
	}
	c.mu.Lock()
	delete(c.unstarted, id)
	c.mu.Unlock()
	files.User.Close() // the device's mappings keep the files; the client's descriptors are its own
	files.Status.Close()
	return nil
}

// ANCHOR_END: startchannel

// closeChannel takes one of the client's channels off its engine and
// gives its pages back to the device.
func (c *client) closeChannel(id abi.Channel) error {
	c.mu.Lock()
	ch, ok := c.chans[id]
	h := c.holds[id]
	files, unstarted := c.unstarted[id]
	delete(c.chans, id)
	delete(c.holds, id)
	delete(c.unstarted, id)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%v is not a channel of this client: %w", id, uapi.ErrNoEntry)
	}
	if unstarted {
		defer files.User.Close() // after Close has unshared it: the linger's watches see the files go when the client lets go too
		defer files.Status.Close()
	}
	c.publishIDs()
	// The save area is refunded once the channel is off its runlist, when
	// it is free for another; the channel itself once its files are gone
	// too (linger.go), which for a client that let go of them is at once.
	defer func() {
		c.refund(uapi.Pools{DeviceMemory: c.channelCost().DeviceMemory})
		c.s.linger.closed(h)
	}()
	err := ch.Close() // returns once the engine has let it go, and the pages are the device's again (Unshare)
	c.judgeHangs()    // hangbars.go: a reset under its last command is counted by now, and may have brought no Notify
	return err
}

// channelCost is what a channel takes from the client's quotas: its id,
// and its engine-context save area's device memory (quota.go).
func (c *client) channelCost() uapi.Pools {
	return uapi.Pools{Channels: 1, DeviceMemory: c.s.drv.ContextSaveSize()}
}

// publishIDs stores the client's channel list for kickLoop.
func (c *client) publishIDs() {
	c.mu.Lock()
	ids := make([]abi.Channel, 0, len(c.chans))
	for id := range c.chans {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	c.ids.Store(&ids)
}

func (c *client) alloc(a *uapi.Alloc) error {
	if a.Size == 0 {
		return fmt.Errorf("ALLOC of 0 bytes: %w", uapi.ErrInval)
	}
	if a.Size > c.s.drv.MemorySize() {
		return fmt.Errorf("ALLOC of %d bytes from a device of %d: %w", a.Size, c.s.drv.MemorySize(), uapi.ErrNoMemory) // no quota could grant it
	}
	bytes := allocCharge(a.Size, a.PageSize)
	if err := c.charge(uapi.Pools{DeviceMemory: bytes}); err != nil {
		return err
	}
	va, err := c.ctx.Alloc(a.Size, abi.PageSize(a.PageSize)) // 0: the largest page Size fills
	if err != nil {
		c.refund(uapi.Pools{DeviceMemory: bytes})
		return err
	}
	if err := c.chargeTables(); err != nil { // the tables the mapping added (quota.go)
		back, ferr := c.ctx.FreeRelease(va) // its tables go back at once; its memory once queued work has passed it (driver: deferred.go)
		c.refundTables()
		c.owe(uapi.Pools{DeviceMemory: bytes}, back) // owed.go
		return errors.Join(fmt.Errorf("ALLOC of %d bytes: %w", a.Size, err), ferr)
	}
	a.VA = va
	c.mu.Lock()
	c.allocs[va] = bytes
	c.devMem += bytes
	c.mu.Unlock()
	return nil
}

func (c *client) free(va uint64) error {
	c.mu.Lock()
	size, ok := c.allocs[va]
	delete(c.allocs, va)
	c.devMem -= size
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("FREE of %#x, not an allocation of this client: %w", va, uapi.ErrNoEntry)
	}
	defer c.refundTables() // the tables the unmap emptied (quota.go)
	back, err := c.ctx.FreeRelease(va)
	c.owe(uapi.Pools{DeviceMemory: size}, back) // charged until the memory is the driver's again (owed.go)
	return err
}

// hostRegister maps a client's memfd into the daemon, pins and registers
// it for DMA, and maps it into the client's context. The memfd must be
// sealed against shrinking: the engines copy from it, and a client that
// truncated it under them would turn the copy into SIGBUS in the daemon.
func (c *client) hostRegister(a *uapi.HostRegister, fd int) error {
	page := uint64(os.Getpagesize())
	switch {
	case a.Size == 0 || a.Size%page != 0:
		return fmt.Errorf("HOST_REGISTER of %d bytes, not a positive multiple of the %d-byte page: %w", a.Size, page, uapi.ErrInval)
	}
	mapping, err := mapSealed(fd, a.Size)
	if err != nil {
		return fmt.Errorf("HOST_REGISTER: %w", err)
	}
	// Charged before a byte is locked: mlock makes every page of a
	// sparse memfd real. (Mapping it took nothing.)
	pinned := uapi.Pools{PinnedBytes: a.Size, WindowEntries: 1}
	if err := c.charge(pinned); err != nil {
		unix.Munmap(mapping)
		return fmt.Errorf("HOST_REGISTER of %d bytes: %w", a.Size, err)
	}
	p, err := c.s.drv.HostAdopt(mapping, a.Size)
	if err != nil {
		unix.Munmap(mapping)
		c.refund(pinned)
		return err
	}
	va, err := c.ctx.Map(p, abi.PageSize(a.PageSize))
	if err != nil {
		back, ferr := c.s.drv.HostFreeRelease(p)
		c.oweUnpinned(pinned, back, ferr) // owed.go
		return err
	}
	if err := c.chargeTables(); err != nil { // the tables the mapping added (quota.go)
		back, ferr := c.s.drv.HostFreeRelease(p) // unmaps it from the context
		c.refundTables()
		c.oweUnpinned(pinned, back, ferr)
		return errors.Join(fmt.Errorf("HOST_REGISTER of %d bytes: %w", a.Size, err), ferr)
	}
	a.VA = va
	c.mu.Lock()
	c.hosts[va] = p
	c.hostMem += a.Size
	c.mu.Unlock()
	return nil
}

// ANCHOR: sealed

// mapSealed maps the first size bytes of a client's memfd into the
// daemon, shared. The memfd must be sealed against shrinking: the engines
// copy from it, and a client that truncated it under them would turn the
// copy into SIGBUS in the daemon. size must be whole pages.
func mapSealed(fd int, size uint64) ([]byte, error) {
	page := uint64(os.Getpagesize())
	if size == 0 || size%page != 0 || size > 1<<40 {
		return nil, fmt.Errorf("%d bytes is not a positive multiple of the %d-byte page: %w", size, page, uapi.ErrInval)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("a descriptor that is not a memfd sealed with F_SEAL_SHRINK: %w", uapi.ErrInval)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Size) < size {
		return nil, fmt.Errorf("%d bytes from a memfd of %d: %w", size, st.Size, uapi.ErrInval)
	}
	mapping, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the memfd: %v: %w", err, uapi.ErrInval)
	}
	return mapping, nil
}

// ANCHOR_END: sealed

// managedAlloc makes managed memory whose host side is the client's
// memfd.
func (c *client) managedAlloc(a *uapi.ManagedAlloc, fd int) error {
	if a.Size == 0 || a.Length != roundPage(a.Size) {
		return fmt.Errorf("MANAGED_ALLOC of %d bytes on a memfd of %d; want it rounded up to the page: %w", a.Size, a.Length, uapi.ErrInval)
	}
	mapping, err := mapSealed(fd, a.Length)
	if err != nil {
		return fmt.Errorf("MANAGED_ALLOC: %w", err)
	}
	pinned := uapi.Pools{PinnedBytes: a.Length, WindowEntries: 1}
	if err := c.charge(pinned); err != nil {
		unix.Munmap(mapping)
		return fmt.Errorf("MANAGED_ALLOC of %d bytes: %w", a.Length, err)
	}
	m, err := c.ctx.AllocManagedOn(mapping, a.Size)
	if err != nil {
		unix.Munmap(mapping)
		c.refund(pinned)
		return err
	}
	if err := c.chargeTables(); err != nil { // the tables the mapping added (quota.go)
		back, ferr := m.FreeRelease()
		c.refundTables()
		c.oweUnpinned(pinned, back, ferr) // owed.go
		return errors.Join(fmt.Errorf("MANAGED_ALLOC of %d bytes: %w", a.Length, err), ferr)
	}
	a.VA = m.VA()
	if err := c.keepMemfd(a.VA, fd); err != nil { // pager.go
		back, ferr := m.FreeRelease()
		c.refundTables()
		c.oweUnpinned(pinned, back, ferr)
		return err
	}
	c.mu.Lock()
	c.managed[a.VA] = m
	c.hostMem += a.Length
	c.mu.Unlock()
	return nil
}

// roundPage rounds n up to whole pages.
func roundPage(n uint64) uint64 {
	page := uint64(os.Getpagesize())
	return (n + page - 1) &^ (page - 1)
}

// withManaged runs f on the client's managed allocation at va.
func (c *client) withManaged(va uint64, f func(*driver.Managed) error) error {
	c.mu.Lock()
	m, ok := c.managed[va]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%#x is not managed memory of this client: %w", va, uapi.ErrNoEntry)
	}
	return f(m)
}

func (c *client) managedFree(va uint64) error {
	c.mu.Lock()
	m, ok := c.managed[va]
	delete(c.managed, va)
	if ok {
		c.hostMem -= roundPage(m.Size())
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("MANAGED_FREE of %#x, not managed memory of this client: %w", va, uapi.ErrNoEntry)
	}
	defer c.refundTables() // the tables the unmap emptied (quota.go)
	// Refunded once it is unlocked and its window entry has retired (owed.go).
	pinned := uapi.Pools{PinnedBytes: roundPage(m.Size()), WindowEntries: 1}
	c.stopPager(va) // pager.go
	back, err := m.FreeRelease()
	c.oweUnpinned(pinned, back, err)
	return err
}

func (c *client) hostUnregister(va uint64) error {
	c.mu.Lock()
	p, ok := c.hosts[va]
	delete(c.hosts, va)
	if ok {
		c.hostMem -= uint64(len(p.Bytes()))
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("HOST_UNREGISTER of %#x, not a region of this client: %w", va, uapi.ErrNoEntry)
	}
	defer c.refundTables() // the tables the unmap emptied (quota.go)
	// Refunded once it is unlocked and its window entry has retired
	// (owed.go); read before HostFree, which empties Bytes.
	pinned := uapi.Pools{PinnedBytes: uint64(len(p.Bytes())), WindowEntries: 1}
	back, err := c.s.drv.HostFreeRelease(p) // waits out a command copying from it; unmaps it from the context
	c.oweUnpinned(pinned, back, err)
	return err
}

// notify tells the client that one of its channels has something for its
// waiters: the daemon's interrupt handler calls it (ChannelOptions.Notify).
// It never blocks: the eventfd is non-blocking, and a write it refuses
// (the counter full) leaves a count the client has not read yet anyway.
func (c *client) notify() {
	c.irqMu.RLock()
	defer c.irqMu.RUnlock()
	if c.irqFD < 0 {
		return
	}
	one := [8]byte{1}
	unix.Write(c.irqFD, one[:])
}

// kickLoop wakes the engines of the client's channels each time the
// client writes its kick eventfd: after a doorbell store that found
// RegNeedWakeup set, the client's half of the need-wakeup handshake. A
// client that makes futex calls, as client.GPU does, does not write it — it
// wakes the engine itself, with FUTEX_WAKE on the doorbell (device/kick.go)
// — so this goroutine's one job is a client that makes none (the C
// example; before 2.2, every client), whose kicks would otherwise be
// lost; it costs a parked goroutine per client, woken by nobody else. It
// ends when the descriptor is closed.
func (c *client) kickLoop(kick *os.File) {
	var b [8]byte
	for {
		if _, err := kick.Read(b[:]); err != nil {
			return
		}
		if ids := c.ids.Load(); ids != nil {
			for _, id := range *ids {
				c.s.dev.Wake(id)
			}
		}
	}
}

// ANCHOR: teardown

// teardown ends a client, however it went: its channels off their
// engines first — after which no command of its runs, and none holds its
// memory — then its registered host memory (HostFree also waits out any
// command still copying from it), its managed memory and its allocations,
// then its context. Each of those frees is charged until the driver gives
// it back, as the client's own would be (owed.go); what the driver still
// holds when the client has gone is its uid's.
func (c *client) teardown() {
	var start uint64
	if c.s.trace != nil {
		start = c.s.drv.Now()
	}
	hangUp(c.conn) // discard.go: closed last, by closeConn
	if c.exit != nil {
		c.exit.Close() // ends the watch
	}
	c.mu.Lock()
	ids := make([]abi.Channel, 0, len(c.chans))
	for id := range c.chans {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		c.closeChannel(id)
	}
	c.s.linger.orphan(c) // what its closed channels' files still cost is its uid's from here
	c.mu.Lock()
	hosts := make([]uint64, 0, len(c.hosts))
	for va := range c.hosts {
		hosts = append(hosts, va)
	}
	c.mu.Unlock()
	for _, va := range hosts {
		c.hostUnregister(va)
	}
	c.mu.Lock()
	managed := make([]uint64, 0, len(c.managed))
	for va := range c.managed {
		managed = append(managed, va)
	}
	c.mu.Unlock()
	for _, va := range managed {
		c.managedFree(va) // after the channels: no command of the client's is stalled on it
	}
	c.mu.Lock()
	allocs := make([]uint64, 0, len(c.allocs))
	for va := range c.allocs {
		allocs = append(allocs, va)
	}
	c.mu.Unlock()
	for _, va := range allocs {
		c.free(va) // each charged until the driver has it back, as a FREE's is (owed.go)
	}
	if c.ctx != nil {
		if err := c.ctx.Close(); err != nil && !errors.Is(err, driver.ErrClosed) {
			c.s.log.Error("closing a client's context", "pid", c.pid, "err", err)
		}
	}
	if c.kick != nil {
		c.kick.Close() // kickLoop returns
	}
	c.irqMu.Lock()
	if c.irqFD >= 0 {
		unix.Close(c.irqFD)
		c.irqFD = -1
	}
	c.irqMu.Unlock()
	if c.s.trace != nil && c.ctx != nil {
		c.s.trace.Record(trace.Event{Kind: trace.KindDetach, Start: start, End: c.s.drv.Now(), Arg: uint64(c.pid), Seq: uint64(c.ctx.ID())})
	}
	// What its closed channels left queued will never run, so what it
	// freed behind that work has passed: given back now. What the driver
	// still holds (behind context 0's work, or an engine that did not
	// answer) stays charged to its uid until the driver gives it back.
	c.s.settle()
	c.orphanOwed()
	c.refundAll() // its context, which ctx.Close gave back, and the rest
	c.s.remove(c)
	closeConn(c.conn) // discard.go: closing it may wait on what the client left queued in it
	c.s.log.Info("client gone", "pid", c.pid, "calls", c.calls.Load())
}

// ANCHOR_END: teardown

// errnoFor maps an error of the driver's onto the uapi's numbers: the
// numbers are the ABI; the Go errors are not.
func errnoFor(err error) uapi.Errno {
	var e uapi.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, driver.ErrOutOfMemory), errors.Is(err, driver.ErrPinLimit), errors.Is(err, driver.ErrNoWindow):
		return uapi.ErrNoMemory
	case errors.Is(err, driver.ErrNoChannel), errors.Is(err, driver.ErrRunlist):
		return uapi.ErrNoChannel
	case errors.Is(err, driver.ErrClosed):
		return uapi.ErrGone
	case errors.Is(err, driver.ErrChannelFaulted), errors.Is(err, driver.ErrContextFaulted):
		return uapi.ErrFault
	case errors.Is(err, driver.ErrBadFree), errors.Is(err, driver.ErrDoubleFree), errors.Is(err, driver.ErrBadHostFree):
		return uapi.ErrNoEntry
	case errors.Is(err, device.ErrShared):
		return uapi.ErrBusy
	case errors.Is(err, driver.ErrTimeout): // an engine did not answer in its bound: it still holds what the call named
		return uapi.ErrBusy
	}
	return uapi.ErrInval
}
