// Package uapi is the interface of softgpud, the daemon that owns the
// device: the one place where the daemon and every client — Go, through
// the client library, or C, through include/softgpu_uapi.h — agree on
// bytes. It plays the part of a DRM driver's uapi header: request numbers,
// argument structs, error numbers, and the layout of the memory a client
// maps. Like package abi beside it, it is data with a fixed little-endian
// layout and no Go pointers, and one table, Calls, lists every call.
//
// # The device node
//
// The daemon serves a Unix SOCK_SEQPACKET socket, the "device node". A
// client connects (open) and makes control calls on the connection
// (ioctl); the connection's end (close) releases everything the client
// held. Control calls are the slow path. The data path — command slots,
// doorbells, completions, fences — is shared memory: memfds the daemon
// hands out with SCM_RIGHTS, which the client maps (memfd.go). Submitting
// a command is a few stores, as with a real GPU's user-mode driver.
//
// # Calls
//
// A call is one datagram from the client and one back, each a 16-byte
// Header and a payload (message.go):
//
//	call   Request | Errno = 0 | Seq | the argument, if dir has IocWrite
//	reply  Request | Errno     | Seq | the argument, if dir has IocRead
//
// The request number is a Linux ioctl number, built as _IOC builds one
// (ioc.go): direction, argument size, the type byte 'G', and the call's
// number. So the number alone fixes both messages' sizes, and a struct
// that grows gets a new number. Each call has one argument struct
// (args.go), which the client fills and the daemon returns with its out
// fields filled (IOWR), only reads (IOW), or only fills (IOR). File
// descriptors travel in SCM_RIGHTS, a fixed number per call (FDsIn) and
// per successful reply (FDsOut); an error reply carries none, and its
// payload is zero.
//
//	nr    name             dir   argument        fds
//	0x00  VERSION          IOWR  Version         -
//	0x01  ATTACH           IOR   Attach          reply: public memfd, kick eventfd, irq eventfd
//	0x02  CHANNEL_OPEN     IOWR  ChannelOpen     reply: user memfd, status memfd
//	0x03  CHANNEL_CLOSE    IOW   ChannelClose    -
//	0x04  ALLOC            IOWR  Alloc           -
//	0x05  FREE             IOW   Free            -
//	0x06  HOST_REGISTER    IOWR  HostRegister    call: the client's memfd
//	0x07  HOST_UNREGISTER  IOW   HostUnregister  -
//	0x08  INFO             IOR   Info            -
//	0x09  CLIENT_INFO      IOWR  ClientInfo      -
//	0x0a  MANAGED_ALLOC    IOWR  ManagedAlloc    call: the client's memfd
//	0x0b  MANAGED_SYNC     IOW   ManagedSync     -
//	0x0c  MANAGED_PREFETCH IOW   ManagedPrefetch -
//	0x0d  MANAGED_FREE     IOW   ManagedFree     -
//	0x0e  MANAGED_RESIDENT IOWR  ManagedResident -
//	0x0f  CLIENT_QUOTA     IOWR  ClientQuota     -      (since 2.1)
//	0x10  MANAGED_PAGER    IOW   ManagedPager    call: userfaultfd, liveness socket (since 2.2)
//	0x11  CHANNEL_START    IOW   ChannelStart    -      (since 3.0)
//
// VERSION comes first on every connection, as DRM_IOCTL_VERSION does: the
// daemon answers any other call before it with ErrNotNegotiated, and a
// VERSION whose major version is not its own with ErrVersion. A client
// then ATTACHes (it becomes a context of the device), opens channels
// (CHANNEL_OPEN, every page of the channel's two memfds touched, then
// CHANNEL_START: ChannelOpen says why), allocates memory and submits.
// INFO, CLIENT_INFO and CLIENT_QUOTA are for tools.
//
// The daemon decodes every datagram with DecodeCall, which never panics
// and says what is wrong with a message as an Errno; a client uses
// EncodeCall and DecodeReply. The Seq of a call is the client's to choose;
// the reply echoes it.
//
// # Errors
//
// The Errno of a reply is OK or one of (errno.go):
//
//	1 ErrBadRequest     2 ErrSize       3 ErrFDs        4 ErrInval
//	5 ErrNotNegotiated  6 ErrVersion    7 ErrNoMemory   8 ErrNoChannel
//	9 ErrNoEntry       10 ErrPerm      11 ErrGone      12 ErrBusy
//	13 ErrFault        14 ErrQuota
//
// The first four are about the message: the daemon's decoder finds them.
// The rest are about what the call asked for, but for one use of ErrBusy:
// at ATTACH and CHANNEL_OPEN it says the caller's uid is barred for a
// while. The daemon bars a uid when the watchdog has reset an engine
// under a command of one of its clients — a command that never reached a
// preemption point — for 30 s at first, twice as long for each hang soon
// after the last bar, and it hangs up every connection of the uid then.
// A client may try again later (softgpud's server/hangbars.go).
//
// # Shared memory
//
// ATTACH hands out the public memfd (the device's global page and the
// engines' status pages, read-only); CHANNEL_OPEN hands out a channel's
// user memfd (its doorbell page and submission ring, read-write) and its
// status memfd (its status page and completion ring, read-only), all
// hole until the client touches every page and calls CHANNEL_START:
// every page of them is the client's own memory, never the daemon's.
// Each page in them is the register-space page of the same name, at the
// offsets package abi gives, so a command is submitted exactly as the
// in-process driver submits one: write the slot, store the doorbell, load
// the engine's RegNeedWakeup, and if it reads 1 kick the engine: since
// 2.2, FUTEX_WAKE on the doorbell word itself (AttachFDKick says how).
// memfd.go gives the offsets; the C header repeats them with the abi
// constants a C client needs.
//
// # The C header
//
// include/softgpu_uapi.h is generated from this package's tables and
// comments (header_gen_test.go) and checked against them by
// TestCHeaderIsCurrent; `go test ./uapi -run CHeader -update` rewrites it.
// TestCHeaderCompiles compiles it with the system's C compiler and checks
// every size, offset and request number against Go's.
package uapi
