package uapi

import (
	"fmt"
	"reflect"
)

// Arg is a call's argument struct: a pointer to one of the structs of
// args.go. Its Request method names the call it is the argument of.
type Arg interface {
	Request() uint32
}

// The request numbers, one per call. Each is written out so that a struct
// that changes size (and so the number) fails TestRequestNumbers, which
// recomputes each from its parts: the number is the ABI, and changing it
// is a decision, not a side effect.
const (
	IoctlVersion         = 0xC0404700 // IOWR(0x00, 64): struct Version
	IoctlAttach          = 0x80184701 // IOR(0x01, 24): struct Attach
	IoctlChannelOpen     = 0xC0284702 // IOWR(0x02, 40): struct ChannelOpen
	IoctlChannelClose    = 0x40084703 // IOW(0x03, 8): struct ChannelClose
	IoctlAlloc           = 0xC0184704 // IOWR(0x04, 24): struct Alloc
	IoctlFree            = 0x40084705 // IOW(0x05, 8): struct Free
	IoctlHostRegister    = 0xC0184706 // IOWR(0x06, 24): struct HostRegister
	IoctlHostUnregister  = 0x40084707 // IOW(0x07, 8): struct HostUnregister
	IoctlInfo            = 0x80884708 // IOR(0x08, 136): struct Info
	IoctlClientInfo      = 0xC0304709 // IOWR(0x09, 48): struct ClientInfo
	IoctlManagedAlloc    = 0xC018470A // IOWR(0x0a, 24): struct ManagedAlloc
	IoctlManagedSync     = 0x4008470B // IOW(0x0b, 8): struct ManagedSync
	IoctlManagedPrefetch = 0x4020470C // IOW(0x0c, 32): struct ManagedPrefetch
	IoctlManagedFree     = 0x4008470D // IOW(0x0d, 8): struct ManagedFree
	IoctlManagedResident = 0xC010470E // IOWR(0x0e, 16): struct ManagedResident
	IoctlClientQuota     = 0xC090470F // IOWR(0x0f, 144): struct ClientQuota
	IoctlManagedPager    = 0x40204710 // IOW(0x10, 32): struct ManagedPager
	IoctlChannelStart    = 0x40084711 // IOW(0x11, 8): struct ChannelStart
)

// Request returns IoctlVersion: a Version is the argument of VERSION.
func (*Version) Request() uint32 { return IoctlVersion }

// Request returns IoctlAttach: a Attach is the argument of ATTACH.
func (*Attach) Request() uint32 { return IoctlAttach }

// Request returns IoctlChannelOpen: a ChannelOpen is the argument of CHANNEL_OPEN.
func (*ChannelOpen) Request() uint32 { return IoctlChannelOpen }

// Request returns IoctlChannelClose: a ChannelClose is the argument of CHANNEL_CLOSE.
func (*ChannelClose) Request() uint32 { return IoctlChannelClose }

// Request returns IoctlAlloc: a Alloc is the argument of ALLOC.
func (*Alloc) Request() uint32 { return IoctlAlloc }

// Request returns IoctlFree: a Free is the argument of FREE.
func (*Free) Request() uint32 { return IoctlFree }

// Request returns IoctlHostRegister: a HostRegister is the argument of HOST_REGISTER.
func (*HostRegister) Request() uint32 { return IoctlHostRegister }

// Request returns IoctlHostUnregister: a HostUnregister is the argument of HOST_UNREGISTER.
func (*HostUnregister) Request() uint32 { return IoctlHostUnregister }

// Request returns IoctlInfo: a Info is the argument of INFO.
func (*Info) Request() uint32 { return IoctlInfo }

// Request returns IoctlClientInfo: a ClientInfo is the argument of CLIENT_INFO.
func (*ClientInfo) Request() uint32 { return IoctlClientInfo }

// Request returns IoctlManagedAlloc: a ManagedAlloc is the argument of MANAGED_ALLOC.
func (*ManagedAlloc) Request() uint32 { return IoctlManagedAlloc }

// Request returns IoctlManagedSync: a ManagedSync is the argument of MANAGED_SYNC.
func (*ManagedSync) Request() uint32 { return IoctlManagedSync }

// Request returns IoctlManagedPrefetch: a ManagedPrefetch is the argument of MANAGED_PREFETCH.
func (*ManagedPrefetch) Request() uint32 { return IoctlManagedPrefetch }

// Request returns IoctlManagedFree: a ManagedFree is the argument of MANAGED_FREE.
func (*ManagedFree) Request() uint32 { return IoctlManagedFree }

// Request returns IoctlManagedResident: a ManagedResident is the argument of MANAGED_RESIDENT.
func (*ManagedResident) Request() uint32 { return IoctlManagedResident }

// Request returns IoctlClientQuota: a ClientQuota is the argument of CLIENT_QUOTA.
func (*ClientQuota) Request() uint32 { return IoctlClientQuota }

// Request returns IoctlManagedPager: a ManagedPager is the argument of MANAGED_PAGER.
func (*ManagedPager) Request() uint32 { return IoctlManagedPager }

// Request returns IoctlChannelStart: a ChannelStart is the argument of CHANNEL_START.
func (*ChannelStart) Request() uint32 { return IoctlChannelStart }

// Call describes one call: a row of Calls.
type Call struct {
	Name    string     // the call's name, as in the C header's SOFTGPU_IOCTL_<Name>
	Request uint32     // its request number
	FDsIn   int        // file descriptors the call carries
	FDsOut  int        // file descriptors a successful reply carries (an error reply carries none)
	New     func() Arg // returns a zeroed argument struct of the call
}

// ANCHOR: calls

// Calls is every call, in nr order: the one list that the daemon's
// dispatch, the decoders, the C header and the tests all read. A call
// missing from it does not exist.
var Calls = [...]Call{
	{"VERSION", IoctlVersion, 0, 0, func() Arg { return new(Version) }},
	{"ATTACH", IoctlAttach, 0, 3, func() Arg { return new(Attach) }},
	{"CHANNEL_OPEN", IoctlChannelOpen, 0, 2, func() Arg { return new(ChannelOpen) }},
	{"CHANNEL_CLOSE", IoctlChannelClose, 0, 0, func() Arg { return new(ChannelClose) }},
	{"ALLOC", IoctlAlloc, 0, 0, func() Arg { return new(Alloc) }},
	{"FREE", IoctlFree, 0, 0, func() Arg { return new(Free) }},
	{"HOST_REGISTER", IoctlHostRegister, 1, 0, func() Arg { return new(HostRegister) }},
	{"HOST_UNREGISTER", IoctlHostUnregister, 0, 0, func() Arg { return new(HostUnregister) }},
	{"INFO", IoctlInfo, 0, 0, func() Arg { return new(Info) }},
	{"CLIENT_INFO", IoctlClientInfo, 0, 0, func() Arg { return new(ClientInfo) }},
	{"MANAGED_ALLOC", IoctlManagedAlloc, 1, 0, func() Arg { return new(ManagedAlloc) }},
	{"MANAGED_SYNC", IoctlManagedSync, 0, 0, func() Arg { return new(ManagedSync) }},
	{"MANAGED_PREFETCH", IoctlManagedPrefetch, 0, 0, func() Arg { return new(ManagedPrefetch) }},
	{"MANAGED_FREE", IoctlManagedFree, 0, 0, func() Arg { return new(ManagedFree) }},
	{"MANAGED_RESIDENT", IoctlManagedResident, 0, 0, func() Arg { return new(ManagedResident) }},
	{"CLIENT_QUOTA", IoctlClientQuota, 0, 0, func() Arg { return new(ClientQuota) }},
	{"MANAGED_PAGER", IoctlManagedPager, 2, 0, func() Arg { return new(ManagedPager) }},
	{"CHANNEL_START", IoctlChannelStart, 0, 0, func() Arg { return new(ChannelStart) }},
}

// ANCHOR_END: calls

// CallSize returns the bytes of payload the call's message carries: the
// argument struct if the client writes it (IocWrite), else nothing.
func (c *Call) CallSize() int {
	if Dir(c.Request)&IocWrite == 0 {
		return 0
	}
	return int(Size(c.Request))
}

// ReplySize returns the bytes of payload the call's reply carries: the
// argument struct if the client reads it (IocRead), else nothing.
func (c *Call) ReplySize() int {
	if Dir(c.Request)&IocRead == 0 {
		return 0
	}
	return int(Size(c.Request))
}

// HeaderSize is the size of a Header, the start of every message.
const HeaderSize = 16

// MaxMessage is the size of the largest message of either direction: a
// header and the largest argument struct (ClientQuota). A buffer this long
// receives any well-formed message whole; a receiver that sees MSG_TRUNC
// with it has a message no call has.
const MaxMessage = HeaderSize + 144

// MaxFDs is the most file descriptors any message carries (ATTACH's
// reply): the size of a receiver's SCM_RIGHTS buffer.
const MaxFDs = 3

// Lookup returns the call whose request number is req, or an error
// wrapping ErrBadRequest that says which part of req no call has.
func Lookup(req uint32) (*Call, error) {
	if Type(req) != Magic {
		return nil, fmt.Errorf("uapi: request %#08x: type byte %#02x is not softgpu's %q: %w", req, Type(req), Magic, ErrBadRequest)
	}
	nr := Nr(req)
	if nr >= uint32(len(Calls)) {
		return nil, fmt.Errorf("uapi: request %#08x: no call has nr %#02x: %w", req, nr, ErrBadRequest)
	}
	c := &Calls[nr]
	if c.Request != req {
		return nil, fmt.Errorf("uapi: request %#08x: dir %d, size %d; %s is dir %d, size %d: %w",
			req, Dir(req), Size(req), c.Name, Dir(c.Request), Size(c.Request), ErrBadRequest)
	}
	return c, nil
}

// callOf returns the call arg is the argument of. It panics if arg is nil
// or not the type the table gives that call: passing such an Arg is a bug
// in the caller, not something a peer did.
func callOf(arg Arg) *Call {
	if v := reflect.ValueOf(arg); arg == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		panic("uapi: nil argument")
	}
	c, err := Lookup(arg.Request())
	if err != nil {
		panic(fmt.Sprintf("uapi: argument %T: %v", arg, err))
	}
	if want := reflect.TypeOf(c.New()); reflect.TypeOf(arg) != want {
		panic(fmt.Sprintf("uapi: argument %T for %s, whose argument is %v", arg, c.Name, want))
	}
	return c
}
