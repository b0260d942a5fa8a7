// Package uffd is the part of Linux's userfaultfd(2) interface
// (linux/userfaultfd.h) that managed memory's pager uses, which
// golang.org/x/sys/unix does not define: the constants, the layout of a
// fault message, and one function per ioctl (uffd_unsafe.go).
//
// A userfaultfd belongs to the process that made it: every ioctl on it
// acts on that process's address space, whoever makes the call. So a
// client makes one, registers its managed mapping with it, and sends it
// to the daemon; the daemon's ioctls then act on the client's mapping and
// on nothing else (server/pager.go).
package uffd

import (
	"encoding/binary"
	"errors"
)

// The API version and the flags of userfaultfd(2).
const (
	API          = 0xAA
	UserModeOnly = 1 // UFFD_USER_MODE_ONLY: only faults from user mode; allowed unprivileged
)

// Features asked for in Init (UFFD_FEATURE_*).
const (
	FeatureWPShmem = 1 << 12 // UFFD_FEATURE_WP_HUGETLBFS_SHMEM: write-protect on shmem (a memfd)
)

// Register modes (UFFDIO_REGISTER_MODE_*).
const (
	ModeMissing = 1 << 0 // a fault on a page the file does not have
	ModeWP      = 1 << 1 // a write to a write-protected page
)

// The ioctls, _IOWR/_IOR(0xAA, nr, size) as the header builds them.
const (
	ioctlAPI          = 0xC018AA3F // UFFDIO_API, struct uffdio_api (24 bytes)
	ioctlRegister     = 0xC020AA00 // UFFDIO_REGISTER, struct uffdio_register (32)
	ioctlWake         = 0x8010AA02 // UFFDIO_WAKE, struct uffdio_range (16)
	ioctlCopy         = 0xC028AA03 // UFFDIO_COPY, struct uffdio_copy (40)
	ioctlWriteProtect = 0xC018AA06 // UFFDIO_WRITEPROTECT, struct uffdio_writeprotect (24)
)

// Modes of UFFDIO_WRITEPROTECT.
const (
	wpModeWP = 1 << 0
)

// MsgSize is the size of a message read from a userfaultfd (struct
// uffd_msg); EventPagefault is its event byte for a fault.
const (
	MsgSize        = 32
	EventPagefault = 0x12
	EventFork      = 0x13 // UFFD_EVENT_FORK: arg.fork.ufd, at 8, is a descriptor installed in the reader
)

// Flags of a fault (UFFD_PAGEFAULT_FLAG_*).
const (
	FlagWrite = 1 << 0 // the access was a write
	FlagWP    = 1 << 1 // it hit a write-protected page
)

// Fault is a decoded fault message.
type Fault struct {
	Flags   uint64
	Address uint64
}

// ErrNotFault reports a message that is not a page fault: an event the
// pager did not ask for, which a registration without EVENT features
// never delivers.
var ErrNotFault = errors.New("uffd: message is not a page fault")

// Decode reads a fault from msg, one uffd_msg: the event byte at 0, the
// fault's flags at 8 and address at 16.
func Decode(msg []byte) (Fault, error) {
	if len(msg) < MsgSize || msg[0] != EventPagefault {
		return Fault{}, ErrNotFault
	}
	return Fault{Flags: binary.LittleEndian.Uint64(msg[8:]), Address: binary.LittleEndian.Uint64(msg[16:])}, nil
}

// ForkDescriptor returns the userfaultfd a fork event carries: the kernel
// installed it in the process that read the message, which must close it.
// ok is false for every other message.
func ForkDescriptor(msg []byte) (fd int, ok bool) {
	if len(msg) < MsgSize || msg[0] != EventFork {
		return -1, false
	}
	return int(binary.LittleEndian.Uint32(msg[8:])), true
}
