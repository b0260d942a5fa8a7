package softgpu_test

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A bare futex, for Baseline/wake: the floor the engines' wake-up is held
// against. golang.org/x/sys/unix has the system call but not its
// operations; these are from linux/futex.h.
const (
	futexWait        = 0
	futexWake        = 1
	futexPrivateFlag = 128 // the word is not shared with another process
)

// futexSleep blocks the calling thread while *w == val (or until a spurious
// return; callers loop). unix.Syscall6, not RawSyscall: the runtime must
// know the thread is blocked in the kernel.
func futexSleep(w *atomic.Uint32, val uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait|futexPrivateFlag, uintptr(val), 0, 0, 0)
}

// futexWakeOne wakes one thread blocked in futexSleep on w.
func futexWakeOne(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake|futexPrivateFlag, 1, 0, 0, 0)
}

// mappedWords views a mapping as 64-bit words, for
// Baseline/op=futexwake/path=process's page shared by two processes.
func mappedWords(m []byte) []atomic.Uint64 {
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&m[0])), len(m)/8)
}
