//go:build amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64le || mipsle || mips64le

// Package futex is the Linux futex on a register word that two processes
// map: one thread sleeps in the kernel while the word still holds what it
// last saw, and any thread of any process mapping the same page wakes it.
//
// A futex is 32 bits and the registers are 64, so the futex is the low
// half of the word — on a little-endian machine, the four bytes at the
// word's own address. A waiter passes the whole value it last loaded;
// the kernel compares the low half. A word that moved by a multiple of
// 2^32 between that load and the sleep would look unchanged, so every
// sleep here has a timeout, and a caller re-checks its condition on every
// return.
//
// The build constraint above lists the little-endian architectures: on
// a big-endian one the low half is not at the word's address, and the
// package does not build rather than compare the wrong half.
//
// The futexes are not FUTEX_PRIVATE: the key is the page of the shared
// file and the offset in it, so the daemon's mapping and a client's name
// the same futex wherever each has it mapped.
package futex

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The operations, from linux/futex.h (golang.org/x/sys/unix has the
// system call but not these).
const (
	opWait = 0
	opWake = 1
)

// Wait blocks the calling thread while the low half of *w equals that of
// seen, for at most timeout, or until Wake, and reports whether it slept
// out the whole timeout. It returns early, and spuriously, as the kernel
// sees fit: callers load *w again and loop.
//
// It is unix.Syscall6, not RawSyscall, so that the runtime knows the
// thread is blocked in the kernel; the goroutine keeps its P meanwhile,
// as in any blocking system call, until the runtime's monitor hands it to
// another thread that has work for it.
func Wait(w *atomic.Uint64, seen uint64, timeout time.Duration) (timedOut bool) {
	ts := unix.NsecToTimespec(timeout.Nanoseconds())
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWait, uintptr(uint32(seen)),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return errno == unix.ETIMEDOUT
}

// Wake wakes every thread blocked in Wait on w, in any process. It never
// blocks.
func Wake(w *atomic.Uint64) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake, uintptr(1<<31-1), 0, 0, 0)
}
