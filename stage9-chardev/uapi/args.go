package uapi

// The argument structs: one per call, as a Linux ioctl has one.
//
// Every field is a uint32 or a uint64, or an array of them or of a struct
// made the same way, and sits at its natural alignment, with explicit Pad
// and Reserved fields wherever the compiler would otherwise pad. So the
// packed little-endian encoding of a struct (encode.go) is byte for byte
// its Go layout, and the C layout of include/softgpu_uapi.h; every struct
// is a multiple of 8 bytes, so an array of them needs no padding either.
// layout_test.go checks both claims field by field.
//
// Each field's `uapi` tag says who writes it:
//
//	in        the client, in the call; the daemon returns it unchanged
//	out       the daemon, in the reply; zero in the call
//	inout     the client in the call, then the daemon in the reply
//	reserved  nobody yet: zero in the call, and to be ignored in a reply
//
// A call whose out or reserved field is not zero is refused (ErrInval), so
// that a later version can give those bytes a meaning without old
// clients' garbage changing what a call does — the rule abi.ReservedZero
// keeps for a command descriptor. A reply's reserved fields are not
// checked: a newer daemon of the same major version may fill them.

// Version is the argument of VERSION, the first call on every connection,
// as DRM_IOCTL_VERSION is the first a DRM client makes. The daemon refuses
// a major version other than its own with ErrVersion, and otherwise
// describes the device.
type Version struct {
	Major       uint32    `uapi:"inout"`    // the client's VersionMajor; in the reply, the daemon's (the same)
	Minor       uint32    `uapi:"inout"`    // the client's VersionMinor; in the reply, the daemon's
	Patch       uint32    `uapi:"out"`      // the daemon's patch level
	NumEngines  uint32    `uapi:"out"`      // engines of the device: abi.NumEngines
	NumChannels uint32    `uapi:"out"`      // channels of the device: abi.NumChannels
	RingSize    uint32    `uapi:"out"`      // slots in every channel's rings, a power of two
	MemorySize  uint64    `uapi:"out"`      // bytes of device memory
	Caps        uint64    `uapi:"out"`      // what the daemon offers: Cap bits
	Reserved    [3]uint64 `uapi:"reserved"` // room to grow; zero
}

// Capability bits of Version.Caps.
const (
	CapManaged = 1 << 0 // managed memory: allocations whose pages migrate on device faults
	CapTrace   = 1 << 1 // the daemon records a trace of the device
)

// The version of this package's ABI. A daemon and a client of the same
// major version understand each other: a minor version adds calls, caps
// or meanings of reserved fields, and never changes what existed.
//
// 2.0 changed how an armed fence reaches a blocked client: 1.0 wrote the
// irq eventfd, 2.0 wakes the channel's fence word (AttachFDIrq says how
// to sleep on it). A 1.0 client that blocked on the eventfd for a fence
// would wait forever on a 2.0 daemon, so the major moved.
//
// 2.1 added ErrQuota and CLIENT_QUOTA: a 2.0 client meets the new errno
// only where a 2.0 daemon would have run the device out for everyone.
// It also took the device's counters off the public pages (abi/counters.go):
// a 2.0 client that read them there reads zeros; INFO has them.
//
// 2.2 made the kick a futex: a client wakes an engine it found asleep
// with FUTEX_WAKE on its channel's RegDoorbell word (AttachFDKick). A
// 2.2 daemon still serves the kick eventfd for clients of 2.0 and 2.1,
// and a 2.2 client writes it to a daemon older than 2.2.
//
// 2.2 also added MANAGED_PAGER: a 2.1 client never makes the call, and its
// managed memory behaves as before (the host Syncs).
//
// 2.3 gave Pools' reserved word a meaning, PageTables, and the daemon a
// quota on the page-table pool: a 2.2 client ignores the word (a reply's
// reserved fields are not checked), and a call of its that maps meets
// ErrQuota, known since 2.1, once its tables pass its share of the pool,
// where a 2.2 daemon let it take the whole pool, and with it every other
// client's ATTACH. 2.3 withholds the device's activity and other users'
// clients' counters from callers who are neither root nor the daemon's
// user (Info.Withheld, ClientInfo.Withheld, reserved words before): a 2.2
// tool shows them as zeros. 2.3 also zeroes the memory ALLOC gives: a 2.2
// daemon handed it out as the last owner left it. And it charges each
// channel's context-save area to DeviceMemory: a 2.2 client meets
// ErrQuota that many bytes sooner.
//
// 3.0 added CHANNEL_START and changed what CHANNEL_OPEN gives: a channel
// that is not yet served, and whose memfds are all hole; the client maps
// them, touches every page (so every page is its own), and calls
// CHANNEL_START. A 2.x client never calls it: on a 3.0 daemon its
// channels would take its commands and never run them, and it would wait
// forever with no error, so the major moved. Nor does a 3.0 daemon serve
// a client that claims 2.x the old way, at CHANNEL_OPEN: any stranger
// could claim it, and get channels whose pages the daemon wrote (the
// splice hole, book/stage9-chardev.md). It refuses 2.x at VERSION
// (ErrVersion). Everything else 2.3 had, 3.0 has.
const (
	VersionMajor = 3
	VersionMinor = 0
)

// Attach is the argument of ATTACH: the client becomes a context of the
// device and gets the memory every client shares. The successful reply
// carries three file descriptors, at AttachFDPublic, AttachFDKick and
// AttachFDIrq.
type Attach struct {
	Context    uint32 `uapi:"out"`      // the client's context id: the Ctx of every command it submits
	Pad        uint32 `uapi:"reserved"` // zero
	ClockEpoch uint64 `uapi:"out"`      // the device clock's zero as CLOCK_MONOTONIC ns: device clock = now - ClockEpoch
	PublicSize uint64 `uapi:"out"`      // bytes of the public memfd: PublicSize()
}

// The file descriptors of ATTACH's reply, by position in SCM_RIGHTS.
const (
	// AttachFDPublic is the public memfd, to map read-only: the
	// register space's global page and the engines' status pages
	// (memfd.go).
	AttachFDPublic = 0
	// AttachFDKick is an eventfd a client may write (any nonzero count)
	// to wake an engine it found asleep: after it stores a doorbell and
	// then loads the engine's RegNeedWakeup as 1, the need-wakeup
	// handshake of abi/idle.go. Since 2.2 the engine sleeps in the kernel
	// on the doorbell words of the channels it serves, and the usual kick
	// is FUTEX_WAKE on the doorbell word just stored: shared (no
	// FUTEX_PRIVATE_FLAG), its low 32 bits at the word's own address. The
	// daemon still reads the eventfd, the only kick before 2.2, for a
	// client that makes no futex call (examples/c/fill.c). Both eventfds are non-blocking (and
	// stay so in the client, which shares the open file): a write that
	// fails with EAGAIN means the count is full, so a kick is pending
	// already, and a read that fails with EAGAIN means nothing is.
	AttachFDKick = 1
	// AttachFDIrq is an eventfd the daemon writes when one of the
	// client's channels has an interrupt that is not a fence — a fault,
	// or the device stopping. The client reads it to consume the count,
	// then looks at its channels' status pages.
	//
	// A fence reaches a blocked client another way. A waiter stores its
	// fence value to RegIrqTarget and IrqTarget to RegIrqArm (its doorbell
	// page), loads RegFence (its status page) and, if the fence has not
	// been reached, sleeps with FUTEX_WAIT on RegFence's address, passing
	// the low 32 bits of the value it loaded. The engine, after storing a
	// fence, reads the arm and, if it is reached, wakes every thread
	// sleeping on that word with FUTEX_WAKE. Three rules: the futex is
	// shared (no FUTEX_PRIVATE_FLAG: the daemon wakes it through its own
	// mapping of the page); it is the word's low half, at the word's own
	// address on this little-endian ABI; and a waiter re-checks RegFence
	// and the channel's fault on every return, and sleeps with a timeout,
	// since a fault does not change the word.
	AttachFDIrq = 2
)

// ChannelOpen is the argument of CHANNEL_OPEN: a channel on an engine,
// in the client's context. The successful reply carries two file
// descriptors, at ChannelFDUser and ChannelFDStatus. Since 3.0 the
// channel is not yet served, and the daemon has touched no page of
// either memfd: the client maps both, touches every page — a load from
// each page of the status memfd, a store to each page of the user memfd
// (MADV_POPULATE_READ and MADV_POPULATE_WRITE do it in one call each) —
// and then calls CHANNEL_START.
type ChannelOpen struct {
	Engine     uint32 `uapi:"in"`  // abi.EngineCompute or abi.EngineCopy
	Priority   uint32 `uapi:"in"`  // abi.PriorityLow .. abi.MaxPriority; above abi.PriorityNormal needs the daemon's grant (ErrPerm)
	Timeslice  uint64 `uapi:"in"`  // ns the channel may hold the engine while another of its priority waits; 0: no slice; not 0 needs the daemon's grant (ErrPerm)
	Channel    uint32 `uapi:"out"` // the channel's number, for CHANNEL_CLOSE
	RingSize   uint32 `uapi:"out"` // slots in its rings, a power of two
	UserSize   uint64 `uapi:"out"` // bytes of the user memfd: UserSize(RingSize)
	StatusSize uint64 `uapi:"out"` // bytes of the status memfd: StatusSize(RingSize)
}

// The file descriptors of CHANNEL_OPEN's reply, by position in SCM_RIGHTS.
const (
	// ChannelFDUser is the user memfd, to map read-write: the doorbell
	// page and the submission ring.
	ChannelFDUser = 0
	// ChannelFDStatus is the status memfd, to map read-only: the
	// channel's status page and the completion ring.
	ChannelFDStatus = 1
)

// ChannelClose is the argument of CHANNEL_CLOSE. The daemon takes the
// channel off its engine's runlist (commands not yet run complete with
// abi.StatusRemoved); the client should unmap the channel's memfds.
type ChannelClose struct {
	Channel uint32 `uapi:"in"`       // a channel this client opened
	Pad     uint32 `uapi:"reserved"` // zero
}

// ChannelStart is the argument of CHANNEL_START (since 3.0): the daemon
// starts serving a channel CHANNEL_OPEN gave. Every page of both its
// memfds must be there, allocated by the client (ChannelOpen says how):
// a memfd with a hole gets ErrInval ("populate the channel's files before
// CHANNEL_START"), and the channel stays as it was, to be populated and
// started again. On success the daemon seals the user memfd as it sealed
// the status memfd at CHANNEL_OPEN (F_SEAL_FUTURE_WRITE): the mappings
// made before keep writing, but no new writable mapping is made and no
// hole is punched in either file, by anyone, from then on; then it resets
// the channel's doorbell page, status page and completion ring to the
// ring's head and puts the channel on its engine's runlist. A channel
// started already gets ErrBusy; one that is not the client's, ErrNoEntry.
type ChannelStart struct {
	Channel uint32 `uapi:"in"`       // a channel this client opened
	Pad     uint32 `uapi:"reserved"` // zero
}

// Alloc is the argument of ALLOC: device memory, mapped in the client's
// context, zeroed (since 2.3: it may have been another client's).
type Alloc struct {
	Size     uint64 `uapi:"in"`  // bytes; rounded up to the page size
	PageSize uint64 `uapi:"in"`  // abi.Page4K, abi.Page64K or abi.Page2M; 0: the largest of them that Size fills
	VA       uint64 `uapi:"out"` // the allocation's first address in the client's context, aligned to the page size
}

// Free is the argument of FREE: it gives back an allocation of ALLOC.
type Free struct {
	VA uint64 `uapi:"in"` // an Alloc.VA of this client
}

// HostRegister is the argument of HOST_REGISTER: the client's own memory,
// which the device then reaches by DMA, mapped in the client's context.
// The call carries one file descriptor, at HostRegisterFDMemory.
type HostRegister struct {
	Size     uint64 `uapi:"in"`  // bytes, from offset 0 of the memfd; a multiple of the page size
	PageSize uint64 `uapi:"in"`  // as Alloc.PageSize
	VA       uint64 `uapi:"out"` // the first address of the mapping in the client's context
}

// HostRegisterFDMemory is the position of HOST_REGISTER's one file
// descriptor: a memfd the client created, at least Size bytes long, that
// both the client and the daemon map.
const HostRegisterFDMemory = 0

// HostUnregister is the argument of HOST_UNREGISTER: the device forgets
// memory of HOST_REGISTER, and the daemon closes its memfd.
type HostUnregister struct {
	VA uint64 `uapi:"in"` // a HostRegister.VA of this client
}

// InfoEngines is the number of EngineInfo entries in Info: one per engine
// of the device, abi.NumEngines.
const InfoEngines = 2

// Info is the argument of INFO: the device's counters, for a tool like
// nvidia-smi.
//
// (INFO, CLIENT_INFO and CLIENT_QUOTA, since 2.3: a caller that is not
// root, nor the daemon's own user, sees the device's configuration and
// state, and the counters of its own user's clients; the device's
// activity counters and other users' clients' counters read 0, and
// Withheld says so. What another client does is its own: the threat
// model's "no client sees another's counters".)
type Info struct {
	MemoryTotal uint64                  `uapi:"out"` // bytes of device memory
	MemoryUsed  uint64                  `uapi:"out"` // bytes of it allocated
	Clients     uint32                  `uapi:"out"` // connected clients
	Withheld    uint32                  `uapi:"out"` // 1: the caller may not see the device's activity (since 2.3), and every counter here but MemoryTotal, IdleMode and State reads 0
	Messages    uint64                  `uapi:"out"` // control messages the daemon has received, from every client: submissions send none
	Interrupts  uint64                  `uapi:"out"` // interrupts the device has raised
	Faults      uint64                  `uapi:"out"` // replayable faults (managed memory)
	Migrations  uint64                  `uapi:"out"` // pages moved between host and device
	Engines     [InfoEngines]EngineInfo `uapi:"out"` // by abi.Engine
}

// EngineInfo is one engine's part of Info.
type EngineInfo struct {
	Commands uint64 `uapi:"out"`      // commands the engine has completed since the device opened
	Asleep   uint64 `uapi:"out"`      // ns it has spent asleep since then (idle gating)
	IdleMode uint32 `uapi:"out"`      // an abi.IdleMode
	State    uint32 `uapi:"out"`      // abi.EngineRunning (0), abi.EngineStopped (1), abi.EngineAsleep (2) or abi.EngineIdle (3)
	Sleeps   uint64 `uapi:"out"`      // times the engine has gone to sleep
	Channels uint32 `uapi:"out"`      // channels on its runlist
	Pad      uint32 `uapi:"reserved"` // zero
}

// ClientInfo is the argument of CLIENT_INFO: one connected client, by
// position. A tool lists them all by asking for Index 0, 1, … until the
// daemon answers ErrNoEntry.
type ClientInfo struct {
	Index        uint32 `uapi:"in"`  // the n-th connected client, from 0
	Pid          uint32 `uapi:"out"` // its process, from SO_PEERCRED
	Uid          uint32 `uapi:"out"` // its user, from SO_PEERCRED
	Context      uint32 `uapi:"out"` // its context id (0 before ATTACH)
	Channels     uint32 `uapi:"out"` // channels it has open
	Withheld     uint32 `uapi:"out"` // 1: another user's client, whose counters (Channels, DeviceMemory, HostMemory, Calls) the caller may not see (since 2.3): they read 0
	DeviceMemory uint64 `uapi:"out"` // bytes of device memory it has allocated
	HostMemory   uint64 `uapi:"out"` // bytes of host memory it has registered
	Calls        uint64 `uapi:"out"` // messages the daemon has received from it
}

// ManagedAlloc is the argument of MANAGED_ALLOC: managed memory
// (driver/managed.go) across the boundary. The client creates a memfd of
// Length bytes — Size rounded up to 4 KiB — sealed against shrinking, and
// sends it; the daemon makes it the allocation's host side, so the
// client's own mapping of it is what Bytes is in-process: the pages as
// they are on the host, to be read after MANAGED_SYNC.
type ManagedAlloc struct {
	Size   uint64 `uapi:"in"`  // bytes of managed memory
	Length uint64 `uapi:"in"`  // bytes of the memfd: Size rounded up to 4 KiB
	VA     uint64 `uapi:"out"` // the allocation's first address in the client's context
}

// ManagedFDMemory is the position of the memfd in MANAGED_ALLOC.
const ManagedFDMemory = 0

// ManagedSync is the argument of MANAGED_SYNC: every page of the
// allocation at VA brought back to the host, as Managed.Sync.
type ManagedSync struct {
	VA uint64 `uapi:"in"` // a ManagedAlloc.VA of this client
}

// ManagedPrefetch is the argument of MANAGED_PREFETCH: pages moved ahead
// of use, as Managed.Prefetch, and waited for.
type ManagedPrefetch struct {
	VA     uint64 `uapi:"in"`       // a ManagedAlloc.VA of this client
	Offset uint64 `uapi:"in"`       // the first byte, from VA
	Size   uint64 `uapi:"in"`       // bytes
	To     uint32 `uapi:"in"`       // 1: to the device; 2: to the host (driver.ToDevice, driver.ToHost)
	Pad    uint32 `uapi:"reserved"` // zero
}

// ManagedFree is the argument of MANAGED_FREE.
type ManagedFree struct {
	VA uint64 `uapi:"in"` // a ManagedAlloc.VA of this client
}

// ManagedResident is the argument of MANAGED_RESIDENT: where the
// allocation's pages are, as Managed.Resident.
type ManagedResident struct {
	VA     uint64 `uapi:"in"`  // a ManagedAlloc.VA of this client
	Device uint32 `uapi:"out"` // pages in device memory
	Remote uint32 `uapi:"out"` // pages the device reaches on the host (the thrashing guard's)
}

// ManagedPager is the argument of MANAGED_PAGER (since 2.2): the daemon
// becomes the pager of a managed allocation's host side (server/pager.go).
// The client has mapped the allocation's memfd at Base and registered
// [Base, Base+Length) with a userfaultfd of its own, in missing and
// write-protect mode; the call carries that userfaultfd and one end of a
// socket pair whose other end the client keeps armed (client/pager.go):
// the daemon holds it for as long as it serves the client, so that its
// death kills the client instead of leaving a fault unanswered. From then
// on the client touches Bytes with no MANAGED_SYNC: a page on the device
// faults, and the daemon brings it back and answers. The daemon refuses
// it with ErrPerm while it bars the client's uid from its pager (a client
// of the uid held up a call into its memory; server/pager.go), and when
// it cannot page at all (it could not start the helper process that
// punches pages out; server/punch.go); the allocation then works with no
// pager, as before 2.2. On any refusal the
// daemon has closed the socket end it was sent, so the client must
// disarm its own end before it closes its copy of the other.
type ManagedPager struct {
	VA     uint64 `uapi:"in"` // a ManagedAlloc.VA of this client
	Base   uint64 `uapi:"in"` // where the client mapped the memfd, page-aligned
	Length uint64 `uapi:"in"` // bytes registered: the ManagedAlloc's Length
	Flags  uint64 `uapi:"in"` // PagerUserModeOnly, or 0
}

// Flags of ManagedPager.
const (
	// PagerUserModeOnly says the userfaultfd was made with
	// UFFD_USER_MODE_ONLY (an unprivileged client where
	// vm.unprivileged_userfaultfd is 0): a system call that touches a page
	// on the device fails with EFAULT instead of faulting to the daemon,
	// so the client brings a range home before handing it to one.
	PagerUserModeOnly = 1 << 0
)

// The positions of MANAGED_PAGER's file descriptors.
const (
	PagerFDUffd     = 0 // the client's userfaultfd
	PagerFDLiveness = 1 // the daemon's end of the client's liveness socket pair
)

// ClientQuota is the argument of CLIENT_QUOTA (since 2.1): one connected
// client's use of each device-wide pool against its quotas, by position
// as CLIENT_INFO. A call that would take the client, or all the clients of
// its uid together, past a limit fails with ErrQuota.
type ClientQuota struct {
	Index    uint32 `uapi:"in"`  // the n-th connected client, from 0, as CLIENT_INFO's
	Pid      uint32 `uapi:"out"` // its process, from SO_PEERCRED
	Uid      uint32 `uapi:"out"` // its user, from SO_PEERCRED
	Context  uint32 `uapi:"out"` // its context id (0 before ATTACH), to match CLIENT_INFO's
	Use      Pools  `uapi:"out"` // what the client holds
	Limit    Pools  `uapi:"out"` // the most one client may hold
	UidUse   Pools  `uapi:"out"` // what every client of its uid holds, together
	UidLimit Pools  `uapi:"out"` // the most they may hold together
}

// Pools is an amount of each device-wide pool a quota limits.
type Pools struct {
	DeviceMemory  uint64 `uapi:"out"` // bytes of device memory (ALLOC, each rounded up to its pages; each channel's context-save area, since 2.3)
	PinnedBytes   uint64 `uapi:"out"` // bytes of host memory the daemon locks (HOST_REGISTER, MANAGED_ALLOC): every byte of the memfd's range, touched or not
	WindowEntries uint32 `uapi:"out"` // DMA window entries: one per registered memfd
	Contexts      uint32 `uapi:"out"` // contexts: one per ATTACHed connection
	Channels      uint32 `uapi:"out"` // channels open
	PageTables    uint32 `uapi:"out"` // pages of 4 KiB (abi.PageShift) of page-table memory: its context's tables, root included (ATTACH, and every call that maps)
}
