package uffd

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctls' argument structs pass by pointer, so this file needs unsafe.

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// Open makes a userfaultfd, close-on-exec and non-blocking (the daemon
// reads it through its poller), with flags (UserModeOnly or 0), and
// enables the API with features.
func Open(flags int, features uint64) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, uintptr(unix.O_CLOEXEC|unix.O_NONBLOCK|flags), 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("userfaultfd: %w", e)
	}
	api := [3]uint64{API, features, 0} // struct uffdio_api: api, features, ioctls
	if err := ioctl(int(fd), ioctlAPI, unsafe.Pointer(&api)); err != nil {
		unix.Close(int(fd))
		return -1, fmt.Errorf("UFFDIO_API with features %#x: %w", features, err)
	}
	return int(fd), nil
}

// Register registers [start, start+length) of the caller's address space
// with fd in mode.
func Register(fd int, start, length, mode uint64) error {
	reg := [4]uint64{start, length, mode, 0} // struct uffdio_register: range, mode, ioctls
	if err := ioctl(fd, ioctlRegister, unsafe.Pointer(&reg)); err != nil {
		return fmt.Errorf("UFFDIO_REGISTER [%#x, +%d): %w", start, length, err)
	}
	return nil
}

// WriteProtect sets (protect) or lifts write protection on
// [start, start+length) of fd's address space. Lifting it also wakes the
// threads waiting on a fault in the range, of any kind.
func WriteProtect(fd int, start, length uint64, protect bool) error {
	mode := uint64(0)
	if protect {
		mode = wpModeWP // alone: the kernel refuses it with DONTWAKE, and protecting wakes nobody anyway
	}
	wp := [3]uint64{start, length, mode} // struct uffdio_writeprotect: range, mode
	return ioctl(fd, ioctlWriteProtect, unsafe.Pointer(&wp))
}

// Copy fills the missing pages at dst of fd's address space with src,
// each atomically — a page appears whole, or not at all — and wakes the
// threads waiting on them. It returns how many bytes it filled: all of
// src, or, with an error, the pages before the one it stopped at (EEXIST:
// a page is there already; EAGAIN: the address space is changing, or a
// signal came — try the rest again).
func Copy(fd int, dst uint64, src []byte) (filled uint64, err error) {
	cp := [5]uint64{dst, Address(src), uint64(len(src)), 0, 0} // struct uffdio_copy: dst, src, len, mode, copy (out)
	err = ioctl(fd, ioctlCopy, unsafe.Pointer(&cp))
	if err == nil {
		return uint64(len(src)), nil
	}
	if done := int64(cp[4]); done > 0 { // copy: bytes filled, or a negative errno
		filled = uint64(done)
	}
	return filled, err
}

// Wake wakes the threads waiting on a fault in [start, start+length).
func Wake(fd int, start, length uint64) error {
	r := [2]uint64{start, length} // struct uffdio_range
	return ioctl(fd, ioctlWake, unsafe.Pointer(&r))
}

// Address returns the address of b's first byte, as the kernel names it.
func Address(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
