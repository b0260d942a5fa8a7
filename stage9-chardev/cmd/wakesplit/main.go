// Command wakesplit splits the time of one command sent to an asleep
// engine across the boundary — Boundary/op=wake3ms's operation — in two,
// on the device's clock:
//
//	doorbell → stamp   the client rings, kicks the sleeping engine, and
//	                   the engine runs the NOP and stamps its fence
//	stamp → seen       the fence is signalled; the client's wait sees it
//
// The first part is the cross-process wake the kick costs (compare
// Baseline/op=futexwake/path=process); the second is what the client pays
// to notice a completion already written. It sends -n NOPs, each after a
// quiet -gap long enough for the daemon's engine to go to sleep, and
// prints each part's percentiles, and how often the client kicked and how
// often its wait slept.
//
//	go run ./stage9-chardev/cmd/softgpud &
//	go run ./stage9-chardev/cmd/wakesplit
//	taskset -c 0 go run ./stage9-chardev/cmd/wakesplit   # with softgpud on cpu 1: each on its own CPU
//
// Where the kernel runs the two processes decides the second part: run it
// pinned both ways (taskset on softgpud too) to see it. The stage 9
// chapter reads it ("Waking an engine across the boundary").
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

func main() {
	node := flag.String("node", uapi.DefaultNode(), "the device node: softgpud's Unix socket")
	n := flag.Int("n", 400, "NOPs to send, each after a quiet gap")
	gap := flag.Duration("gap", 3*time.Millisecond, "the quiet before each NOP: long enough for the engine to sleep")
	flag.Parse()
	if *n < 1 || *gap < 0 {
		fmt.Fprintln(os.Stderr, "wakesplit: -n must be at least 1 and -gap not negative")
		os.Exit(2)
	}
	if err := run(*node, *n, *gap); err != nil {
		fmt.Fprintln(os.Stderr, "wakesplit:", err)
		os.Exit(1)
	}
}

func run(node string, n int, gap time.Duration) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	var engine, seen, total []int64 // device cycles (ns at the device's 1 GHz)
	kicks, sleeps := g.Kicks(), g.Sleeps()
	for range n {
		sleepFor(gap)
		b := g.NewBatch(client.Copy)
		b.Nop()
		t0 := g.Now()
		p, err := b.Submit()
		if err != nil {
			return err
		}
		if err := p.Wait(); err != nil {
			return err
		}
		t1 := g.Now()
		stamp := p.Fence().SignaledAt() // the engine's stamp of the fence, on the same clock
		engine = append(engine, int64(stamp-t0))
		seen = append(seen, int64(t1-stamp))
		total = append(total, int64(t1-t0))
	}
	fmt.Printf("%d NOPs after a %v gap: %d kicks, %d waits slept\n", n, gap, g.Kicks()-kicks, g.Sleeps()-sleeps)
	for _, r := range []struct {
		name string
		v    []int64
	}{{"doorbell → stamp", engine}, {"stamp → seen", seen}, {"total", total}} {
		fmt.Printf("%-18s p50 %8v  p90 %8v  p99 %8v\n", r.name, pct(r.v, .5), pct(r.v, .9), pct(r.v, .99))
	}
	return nil
}

// sleepFor sleeps d with 1 ns of timer slack, so that the gap is the gap
// asked for, not the kernel's default 50 µs later.
func sleepFor(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for {
		var left unix.Timespec
		if err := unix.Nanosleep(&ts, &left); err != unix.EINTR {
			return
		}
		ts = left
	}
}

// pct is the p-th percentile of v in cycles, as a duration (one cycle is
// one nanosecond at the device's clock rate).
func pct(v []int64, p float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return time.Duration(s[int(p*float64(len(s)-1))])
}
