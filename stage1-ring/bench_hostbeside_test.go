package softgpu_test

import (
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage1-ring"
)

// BenchmarkHostBeside is the application's own work — CRC-32s of a 64 KiB
// buffer, which involve no device at all, on as many goroutines as the
// process has cores (b.RunParallel), as an application that uses the
// machine would — with no device open (device=none) and with a device open
// and idle beside it (device=idle). The difference is what an idle device
// costs the application it serves: engines that spin take cores the host
// would have used. ns/op is per checksum, across all goroutines.
func BenchmarkHostBeside(b *testing.B) {
	besideDevice(b, func(b *testing.B) {
		b.SetBytes(64 << 10)
		var total atomic.Uint32
		m := startMeter()
		b.RunParallel(func(pb *testing.PB) {
			buf := touched(64 << 10)
			produce(buf, 0x5a)
			var sum uint32
			for pb.Next() {
				sum += crc32.ChecksumIEEE(buf)
			}
			total.Add(sum)
		})
		m.report(b)
		sink += uint64(total.Load())
	})
}

// besideDevice runs bench twice: as device=none, with no device open, and
// as device=idle, with a device open and idle for the whole run.
func besideDevice(b *testing.B, bench func(b *testing.B)) {
	for _, open := range []bool{false, true} {
		name := "device=none"
		if open {
			name = "device=idle"
		}
		b.Run(name, func(b *testing.B) {
			if open {
				g := openBench(b, softgpu.Config{})
				defer g.Close()
			}
			bench(b)
		})
	}
}

// BenchmarkHostProcess is HostBeside with the work in another process, as
// the rest of the machine sees an idle device: the benchmark starts a copy
// of its own test binary (hostWorker, below) that computes b.N CRC-32s of a
// 64 KiB buffer on as many goroutines as it has cores, with no device open
// here (device=none) or with one open and idle (device=idle). Inside one
// process the Go scheduler shares its Ps between the application and the
// engines' goroutines, which yield when they poll, so HostBeside shows an
// idle device's cost only partly; between processes the kernel divides the
// cores between threads, and an engine that spins takes its share. ns/op is
// per checksum, timed inside the worker (its start-up is not counted);
// cores is this process's: what the idle device burned meanwhile.
func BenchmarkHostProcess(b *testing.B) {
	besideDevice(b, func(b *testing.B) {
		m := startMeter()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), hostWorkerEnv+"="+strconv.Itoa(b.N))
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("the host worker: %v", err)
		}
		var ns int64
		if _, err := fmt.Sscanf(string(out), "host-worker-ns %d", &ns); err != nil {
			b.Fatalf("the host worker said %q: %v", out, err)
		}
		m.report(b)
		b.ReportMetric(float64(ns)/float64(b.N), "ns/op")
	})
}

// hostWorkerEnv, set in its environment, makes the test binary
// BenchmarkHostProcess's worker: it does the work the variable names and
// exits before any test runs.
const hostWorkerEnv = "SOFTGPU_HOST_WORKER"

func init() {
	if n, err := strconv.Atoi(os.Getenv(hostWorkerEnv)); err == nil && n > 0 {
		fmt.Printf("host-worker-ns %d\n", hostWorker(n))
		os.Exit(0)
	}
}

// hostWorker computes n CRC-32s of a 64 KiB buffer on GOMAXPROCS goroutines
// and returns the nanoseconds they took.
func hostWorker(n int) int64 {
	procs := runtime.GOMAXPROCS(0)
	var next atomic.Int64
	var total atomic.Uint32
	var wg sync.WaitGroup
	start := time.Now()
	for range procs {
		wg.Go(func() {
			buf := touched(64 << 10)
			produce(buf, 0x5a)
			var sum uint32
			for next.Add(1) <= int64(n) {
				sum += crc32.ChecksumIEEE(buf)
			}
			total.Add(sum)
		})
	}
	wg.Wait()
	sink += uint64(total.Load())
	return time.Since(start).Nanoseconds()
}
