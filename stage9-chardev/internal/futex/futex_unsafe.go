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
// the same futex wherever each has it mapped. The one exception is a
// word no other process maps, which WaitAny may be told is private
// (Waiter.Private) and WakePrivate wakes.
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
	opWait    = 0
	opWake    = 1
	opPrivate = 128 // FUTEX_PRIVATE_FLAG: the word is in no other process
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

// Waiter is one word of a WaitAny: sleep while the low half of *Word
// equals that of Seen. Private marks a word no other process maps
// (FUTEX2_PRIVATE): the kernel keys it by address, not by page.
type Waiter struct {
	Word    *atomic.Uint64
	Seen    uint64
	Private bool
}

// futexWaitv is the kernel's struct futex_waitv (linux/futex.h).
type futexWaitv struct {
	val      uint64
	uaddr    uint64
	flags    uint32
	reserved uint32
}

// The futex2 flags of a futexWaitv, from linux/futex.h.
const (
	futex2SizeU32 = 0x02
	futex2Private = 128
)

// MaxWaiters is how many words one WaitAny may name (FUTEX_WAITV_MAX).
const MaxWaiters = 128

// WaitAny blocks the calling thread while every word of ws still holds,
// in its low half, what its Seen says — the kernel compares them all
// before it sleeps, under the same locks a Wake of any of them takes — for
// at most timeout, or until a Wake of any of them. It is futex_waitv
// (Linux 5.16): one sleep on many words, so that one thread can sleep on
// every doorbell that may name work for it. scratch, of at least len(ws)
// entries, is the caller's, so that a sleep allocates nothing; NewScratch
// makes one. It returns early, and spuriously, as the kernel sees fit, and
// at once (EAGAIN) if a word no longer holds its Seen: callers re-check
// their condition and loop. A failure that is no wake-up at all (ENOSYS on
// a kernel without futex_waitv) is returned, and the caller must not loop
// on it.
func WaitAny(ws []Waiter, scratch Scratch, timeout time.Duration) (timedOut bool, err error) {
	if len(ws) == 0 || len(ws) > MaxWaiters || len(ws) > len(scratch.v) {
		return false, unix.EINVAL
	}
	v := scratch.v[:len(ws)]
	for i, w := range ws {
		v[i] = futexWaitv{val: uint64(uint32(w.Seen)), uaddr: uint64(uintptr(unsafe.Pointer(w.Word))), flags: futex2SizeU32}
		if w.Private {
			v[i].flags |= futex2Private
		}
	}
	var ts unix.Timespec // futex_waitv's timeout is absolute, on the clock named
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	ts = unix.NsecToTimespec(ts.Nano() + timeout.Nanoseconds())
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX_WAITV, uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)), 0,
		uintptr(unsafe.Pointer(&ts)), unix.CLOCK_MONOTONIC, 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR:
		return false, nil
	case unix.ETIMEDOUT:
		return true, nil
	}
	return false, errno
}

// Scratch is the kernel-format array a WaitAny fills; keep one per
// sleeping thread.
type Scratch struct{ v []futexWaitv }

// NewScratch returns room for a WaitAny of up to n words.
func NewScratch(n int) Scratch { return Scratch{v: make([]futexWaitv, n)} }

// WakePrivate wakes every thread of this process blocked on w through a
// Waiter marked Private. It never blocks.
func WakePrivate(w *atomic.Uint64) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake|opPrivate, uintptr(1<<31-1), 0, 0, 0)
}

// Len is how many words a WaitAny with this scratch may name.
func (s Scratch) Len() int { return len(s.v) }
