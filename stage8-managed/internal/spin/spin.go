// Package spin is how the busy-wait loops of the device and the driver give
// way when they yield: an idle engine polling its doorbell, a host polling
// for a completion or a fence.
package spin

import (
	"runtime"
	"syscall"
	"time"
)

// ThreadAfter is how long a loop spins before its yields give up the OS
// thread's CPU too, not only the goroutine's P. A wait that ends sooner — a
// round trip, a short gap — never pays for the system call. It is a time
// for the reason YieldAfter is (cadence.go): about what the 256 polls it
// used to be came to, four yields at the old cadence of 64, rounded up.
const ThreadAfter = 4 * time.Microsecond

// ThreadAfterPolls is ThreadAfter for a loop whose cadence counts polls (a
// positive YieldEvery, the SpinYield experiment): that count's old rule.
const ThreadAfterPolls = 256

// Yield is what a loop does when its Cadence says it is due (Due) at its
// polls-th empty poll. It gives way twice.
//
// runtime.Gosched hands the goroutine's P to any goroutine that wants one.
//
// sched_yield, once the loop has spun for ThreadAfter, hands the CPU to
// any thread the kernel has queued behind this one. Engines that sleep
// through gaps mean threads that sleep and wake beside threads that spin,
// and the kernel can wake a thread — the host back from a sleep, a Go
// thread woken to run a goroutine — onto the CPU of a spinning thread while
// the other CPU sits idle. The woken thread then waits behind the spinner
// until the spinner blocks or its time slice ends. Go's execution tracer
// showed it on the 2-vCPU development machine both ways round: an engine
// left runnable behind a host that spun for that engine's completion until
// the host's poll budget ran out and it blocked, and a host left behind an
// idle engine's spin until the engine's idle budget ran out and it slept —
// each time the length of a budget, tens of microseconds, in the tail of
// every idle mode that spins.
//
// The system call is not free, and where every thread spins it costs more
// than it saves: with two engines that never sleep and a host, on two CPUs,
// it made round trips slower. That is the spin idle mode, and it pays it.
func (c *Cadence) Yield(polls int) {
	runtime.Gosched()
	if c.threadDue(polls) {
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// threadDue reports whether the yield at the polls-th poll gives up the
// thread too: after ThreadAfter of spinning, or ThreadAfterPolls polls for a
// counted cadence.
func (c *Cadence) threadDue(polls int) bool {
	if c.every != 0 {
		return polls >= ThreadAfterPolls
	}
	return c.spun >= int64(ThreadAfter)
}
