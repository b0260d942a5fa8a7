package server

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// spinEnv, set to "1", makes this test binary a process that keeps
// three threads per CPU busy until it is killed: spinners starts one.
const spinEnv = "SOFTGPU_TEST_SPINNERS"

func init() {
	if os.Getenv(spinEnv) == "1" {
		runtime.GOMAXPROCS(3 * runtime.NumCPU())
		for range 3 * runtime.NumCPU() {
			go func() {
				for {
				}
			}()
		}
		select {}
	}
}

// spinners starts a process that keeps three threads per CPU busy until
// the test ends, so that any other thread waits for a core most of the
// time; it returns once they spin.
func spinners(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	time.Sleep(50 * time.Millisecond) // its threads started
}

// onThread runs f on a goroutine locked to its thread, and waits for it.
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
		close(done)
	}()
	<-done
}

// A call that sleeps a little and then waits for a core among spinning
// threads is charged its sleep, not its wait: the wait is the machine's
// load. Charged its whole time off the CPU, a well-behaved client's copy
// cost it its uid's share under another uid's CPU hog.
func TestAWaitForACoreIsNotChargedAsSleep(t *testing.T) {
	if _, _, ok := schedstat(unix.Gettid()); !ok {
		t.Skip("no schedstat on this kernel: the share charges every moment off the CPU")
	}
	spinners(t)
	const sleep, span = 5 * time.Millisecond, 300 * time.Millisecond
	var waited, off time.Duration
	onThread(func() {
		o := startOffCPU()
		unix.Nanosleep(&unix.Timespec{Nsec: sleep.Nanoseconds()}, nil) // a voluntary switch: it slept
		for time.Duration(monotonicNow()-o.at) < span {
		}
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		off = time.Duration(monotonicNow()-o.at) - (time.Duration(ts.Nano()) - o.cpu)
		waited = o.waited()
	})
	require.Greater(t, off, span/3, "the call's time off the CPU: the spinners did not keep it from its core, and the test shows nothing")
	assert.GreaterOrEqual(t, waited, sleep*9/10, "what the call waited: its %v asleep must count", sleep)
	// What it is charged above its sleep is the Go runtime's: the loop is
	// Go code, preempted every 10 ms, and a locked goroutine preempted
	// sleeps until another thread hands it back — a sleep, which the
	// meter cannot tell from any other (5–18 ms in 300 ms, on the machine
	// measured). A call into a client's memory spends its time in one
	// system call, where nothing preempts it so.
	t.Logf("slept %v; off the CPU %v; charged %v", sleep, off, waited)
	assert.Less(t, waited, off/4, "what the call waited, of %v off the CPU: its waits for a core must not count", off)
}

// From another thread, a call asleep is seen asleep, for about as long
// as it has slept: bounded judges a call on a thread of ours by that.
// (That a thread running, or waiting for a core, is not seen asleep is
// not tested here: a goroutine that spins in Go code is preempted by the
// runtime every 10 ms, and a locked one then sleeps until another thread
// hands it back, so it is asleep now and then; a call into a client's
// memory spins, if at all, in the kernel.)
func TestACallIsSeenAsleepOnlyWhileItSleeps(t *testing.T) {
	if _, _, ok := schedstat(unix.Gettid()); !ok {
		t.Skip("no schedstat on this kernel")
	}
	taken := make(chan offCPU)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		o := startOffCPU()
		taken <- o
		unix.Nanosleep(&unix.Timespec{Sec: 1}, nil)
		close(done)
	}()
	o := <-taken
	time.Sleep(200 * time.Millisecond)
	before := time.Duration(monotonicNow() - o.at)
	now, slept := o.asleep()
	after := time.Duration(monotonicNow() - o.at)
	if after > 900*time.Millisecond {
		t.Skipf("this goroutine woke %v after the sleeper began, too near the end of its 1 s sleep to look at it", after)
	}
	assert.True(t, now, "a thread in nanosleep is asleep")
	assert.GreaterOrEqual(t, slept, before-20*time.Millisecond, "how long it has slept, looked at %v after it began: about all of it", before)
	assert.LessOrEqual(t, slept, after, "how long it has slept: no more than its time")
	<-done

}
