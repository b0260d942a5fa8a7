package server

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// What a call into a client's memory waited, which is what its uid's
// share of the pager is charged (pagerShare).
//
// A call's thread spends the call in one of three ways: running (its CPU
// time: the call's own work, copying pages, punching them out); asleep
// (on a lock — the client's, which is the point — or on the kernel's);
// or runnable but waiting for a core, which is the machine's load and
// nobody's fault. Only the sleep is charged. The kernel counts the first
// (CLOCK_THREAD_CPUTIME_ID) and the third (run_delay, the second field of
// /proc/<pid>/task/<tid>/schedstat, which it adds to each time the thread
// gets a core back); the sleep is what is left of the call's time.
//
// The share once charged every moment off the CPU, the third with the
// second, if the thread slept at all: a well-behaved client's UFFDIO_COPY
// that slept once and then waited its turn among another uid's 400
// spinning threads was charged 299 ms, and the client was dropped and
// its uid barred (TestCPULoadBarsNoBusyClient, in a CI run). On a kernel
// without schedstat (CONFIG_SCHED_INFO off) run_delay cannot be read,
// and the share falls back to that: time off the CPU.

// offCPU is taken on the calling thread before the call, and read
// (waited) on the same thread after it — the thread locked to the call in
// between — or, while the call runs, from another thread (asleep).
type offCPU struct {
	at       int64         // monotonicNow
	cpu      time.Duration // the thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
	queued   time.Duration // the thread's time waiting for a core (schedstat's run_delay)
	queuedOK bool          // whether queued could be read
	slept    int64         // the thread's voluntary context switches (getrusage RUSAGE_THREAD)
	tid      int           // the thread, for asleep from another
}

func startOffCPU() offCPU {
	tid := unix.Gettid()
	_, queued, ok := schedstat(tid)
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return offCPU{at: monotonicNow(), cpu: time.Duration(ts.Nano()), queued: queued, queuedOK: ok, slept: ru.Nvcsw, tid: tid}
}

// waited returns, on o's thread, what the call since o waited asleep:
// its time, less the CPU time the thread ran in it, less the time it
// waited for a core; 0 if the thread never slept in it (no voluntary
// switch), its time off the CPU then all the scheduler's.
func (o offCPU) waited() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	if ru.Nvcsw == o.slept {
		return 0
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	elapsed := time.Duration(monotonicNow() - o.at)
	return o.sleep(elapsed, time.Duration(ts.Nano()))
}

// sleep is what the call slept in elapsed, its thread's CPU time now cpu:
// the rest once its CPU time and its waits for a core are taken out.
func (o offCPU) sleep(elapsed, cpu time.Duration) time.Duration {
	off := elapsed - (cpu - o.cpu)
	if _, queued, ok := schedstat(o.tid); ok && o.queuedOK {
		off -= queued - o.queued
	}
	return max(off, 0)
}

// asleep reports, from another thread, whether o's thread is asleep now
// (in any state but R, running or waiting for a core), and if so, how
// long it has slept since o was taken. A thread whose state cannot be
// read is taken as asleep for all that time.
func (o offCPU) asleep() (bool, time.Duration) {
	elapsed := time.Duration(monotonicNow() - o.at)
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", o.tid))
	i := bytes.LastIndexByte(b, ')') // the state follows the command, which may hold anything
	if err != nil || i < 0 || i+2 >= len(b) {
		return true, elapsed
	}
	if b[i+2] == 'R' {
		return false, 0
	}
	cpu, _, ok := schedstat(o.tid) // asleep, its CPU time is up to date
	if !ok {
		return true, elapsed
	}
	return true, o.sleep(elapsed, cpu)
}

// schedstats keeps each thread's schedstat file open, read with pread:
// opening it costs a call about 5 µs (openat) to 9 µs (a path) on the
// machine measured, a pread of it 1 µs, and every call into a client's
// memory reads it as it begins. A descriptor is the thread's, not its
// number's: once the thread ends, its reads fail (ESRCH), and a later
// thread given the same number opens its own. The daemon's threads are
// few and long-lived; past schedstatsMax the lot is closed and opened
// again as needed.
var schedstats struct {
	sync.Mutex
	fds map[int]int // thread id → its schedstat, O_RDONLY|O_CLOEXEC
}

const schedstatsMax = 256

// schedstat returns thread tid's CPU time and its time waiting for a core
// (the first two fields of its schedstat), ok false if they cannot be
// read. The read is made with the lock held, so that no descriptor is
// closed (and its number given to another file) under it.
func schedstat(tid int) (cpu, queued time.Duration, ok bool) {
	schedstats.Lock()
	defer schedstats.Unlock()
	var buf [96]byte
	for attempt := 0; attempt < 2; attempt++ {
		fd, known := schedstats.fds[tid]
		if !known {
			if schedstats.fds == nil || len(schedstats.fds) >= schedstatsMax {
				for _, fd := range schedstats.fds {
					unix.Close(fd)
				}
				schedstats.fds = make(map[int]int)
			}
			var err error
			if fd, err = unix.Open(fmt.Sprintf("/proc/self/task/%d/schedstat", tid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				return 0, 0, false
			}
			schedstats.fds[tid] = fd
		}
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil { // a thread that ended: its number may be another's now
			delete(schedstats.fds, tid)
			unix.Close(fd)
			continue
		}
		fields := bytes.Fields(buf[:n])
		if len(fields) < 2 {
			return 0, 0, false
		}
		run, err1 := strconv.ParseInt(string(fields[0]), 10, 64)
		wait, err2 := strconv.ParseInt(string(fields[1]), 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		return time.Duration(run), time.Duration(wait), true
	}
	return 0, 0, false
}
