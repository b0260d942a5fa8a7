// Package spin is how the busy-wait loops of the device and the driver give
// way when they yield: an idle engine polling its doorbell, a host polling
// for a completion or a fence.
package spin

import (
	"runtime"
	"syscall"
)

// ThreadAfter is how many polls a loop makes before its yields give up the
// OS thread's CPU too, not only the goroutine's P. A wait that ends sooner —
// a round trip, a short gap — never pays for the system call.
//
// It stays a count while the Gosched cadence is a time (cadence.go): a
// loop's clock also runs while the kernel has the thread descheduled, so on
// a busy machine a spin crosses any stated time soon after the thread is
// given its CPU back, and the next yield would give the CPU away again. A
// 4 µs ThreadAfter, measured against this count in one interleaved run of
// stage 7 binaries on the loaded development machine, made
// FenceSignal/irq=threaded 2.7 times as slow (commit 560a324, in no
// record).
const ThreadAfter = 256

// Yield is what a loop that has polled polls times without success does
// when it yields. It gives way twice.
//
// runtime.Gosched hands the goroutine's P to any goroutine that wants one.
//
// sched_yield, once the loop has polled ThreadAfter times, hands the CPU to
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
// every idle mode that spins (the traced runs are in commit 615bd58; the
// idle-before record, taken at e1658fb before this yield, has the
// default's 99th percentile on IdleGap/gap=30us at 54.8 µs, a budget on
// top of the fill).
//
// The system call is not free, and where every thread spins it costs more
// than it saves: with two engines that never sleep and a host, on two CPUs,
// it made round trips slower (RoundTrip +36 % tried from stage 0; stage
// 7's spin mode +5 to 18 % at the median; interleaved runs in commit
// 615bd58, in no record). That is the spin idle mode, and it pays it.
func Yield(polls int) {
	runtime.Gosched()
	if polls >= ThreadAfter {
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
}
