package softgpu_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/futex"
)

// benchFutexWakeProcess is Baseline/op=futexwake/path=process: the floor
// under Boundary/op=wake3ms/path=node, measured the same way. A child
// process (this test binary again, in the sleeper role below) sleeps in
// FUTEX_WAIT on a word of a memfd page both processes map — shared, not
// FUTEX_PRIVATE, as the daemon's engine sleeps on a client's doorbell
// (device/kick.go). The loop sleeps 3 ms (sleepFor, as wake3ms does),
// stamps the clock, stores a new value to the word, calls FUTEX_WAKE, and
// spins (yielding, as the client's wait does) until the child has stored
// the value back to a word of its own. ns/op is the median of that, with
// the mean and percentiles, as wake3ms reports its NOPs: a wake across the
// boundary and one line back, with no device and no command.
func benchFutexWakeProcess(b *testing.B) { benchFutexProcess(b, false) }

// benchFutexPingPongProcess is Baseline/op=futexpingpong/path=process: the
// same, but the way back is a wake too. After its store to seq and its
// FUTEX_WAKE, the loop sleeps in FUTEX_WAIT on ack at once, and the
// sleeper, after its store of ack, calls FUTEX_WAKE on it — two wakes
// across the boundary per operation, each of a thread that has just gone
// to sleep or slept 3 ms. It is the floor under a wake3ms whose client
// slept on its fence before the woken engine completed the NOP: the kick,
// then the engine's wake of the fence word (driver/client.go). The
// benchmark's half of the way back is a Go goroutine in futex.Wait, not
// locked to its thread, as the client's sleeper is.
func benchFutexPingPongProcess(b *testing.B) { benchFutexProcess(b, true) }

// benchFutexProcess runs either: pingpong chooses how the answer comes
// back (a wake, or a line the loop polls).
func benchFutexProcess(b *testing.B, pingpong bool) {
	fd, err := unix.MemfdCreate("softgpu-futexwake", unix.MFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	page := os.NewFile(uintptr(fd), "futexwake")
	defer page.Close()
	if err := page.Truncate(4096); err != nil {
		b.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	words := mappedWords(m)
	seq, ack := &words[futexWakeSeq], &words[futexWakeAck] // written by this process; by the sleeper
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	mode := "1"
	if pingpong {
		mode = futexSleeperPingPong
	}
	cmd.Env = append(os.Environ(), futexSleeperEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{page} // the sleeper's descriptor 3
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		seq.Store(futexWakeExit)
		futex.Wake(seq)
		if err := cmd.Wait(); err != nil {
			b.Errorf("the sleeper: %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for ack.Load() != futexWakeReady { // the sleeper has mapped the page
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b.Fatal("the sleeper did not start in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	var lat latencies
	var n uint64
	meter := startMeter()
	for b.Loop() {
		sleepFor(3 * time.Millisecond)
		n++
		start := time.Now()
		seq.Store(n) // pairs with the sleeper's load of seq; its store of ack pairs with the loads below
		futex.Wake(seq)
		for pingpong {
			// The sleeper's store of ack, then its wake, pair with this
			// load, then the kernel's comparison in Wait: a wake before
			// the comparison makes it fail; one after finds this
			// thread queued.
			seen := ack.Load()
			if seen == n {
				break
			}
			if futex.Wait(ack, seen, 10*time.Second) {
				cmd.Process.Kill()
				b.Fatalf("the sleeper did not wake the benchmark for round %d in 10 s", n)
			}
		}
		for polls := 1; ack.Load() != n; polls++ {
			if polls%64 == 0 {
				runtime.Gosched()
				if time.Since(start) > 10*time.Second {
					cmd.Process.Kill()
					b.Fatalf("the sleeper did not answer wake %d in 10 s", n)
				}
			}
		}
		lat = append(lat, time.Since(start))
	}
	meter.report(b)
	lat.report(b)
}

// The words of the page, each on a cache line of its own, and what they
// hold besides a round's number.
const (
	futexWakeSeq    = 0         // the round the benchmark has woken the sleeper for
	futexWakeAck    = 8         // the last round the sleeper saw
	futexWakeReady  = 1<<63 - 1 // in ack: the sleeper is there
	futexWakeExit   = 1<<64 - 1 // in seq: the sleeper exits
	futexSleeperEnv = "SOFTGPU_FUTEXWAKE_SLEEPER"
	// futexSleeperPingPong in futexSleeperEnv: the sleeper wakes ack
	// after each store of it (Baseline/op=futexpingpong).
	futexSleeperPingPong = "pingpong"
)

func init() {
	if os.Getenv(futexSleeperEnv) != "" {
		if err := futexSleeper(os.Getenv(futexSleeperEnv) == futexSleeperPingPong); err != nil {
			fmt.Fprintln(os.Stderr, "futexwake sleeper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// futexSleeper is the child of benchFutexWakeProcess: on a thread of its
// own, it sleeps on seq while seq holds the last round it saw, and stores
// each new round to ack, until seq says exit — or its parent has gone
// (each sleep times out after a second to look). With pingpong it also
// wakes ack after each store of it: the benchmark sleeps there.
func futexSleeper(pingpong bool) error {
	runtime.LockOSThread()
	m, err := unix.Mmap(3, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	words := mappedWords(m)
	seq, ack := &words[futexWakeSeq], &words[futexWakeAck]
	seen := seq.Load()
	ack.Store(futexWakeReady)
	for {
		v := seq.Load()
		switch {
		case v == futexWakeExit:
			return nil
		case v != seen:
			seen = v
			ack.Store(v)
			if pingpong {
				futex.Wake(ack) // after the store: the benchmark's comparison sees it, or this finds it queued
			}
			continue
		}
		if futex.Wait(seq, seen, time.Second) && os.Getppid() == 1 {
			return fmt.Errorf("the benchmark has gone")
		}
	}
}
