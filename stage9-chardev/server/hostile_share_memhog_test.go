package server_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// The victim's calls into its memory are copies — UFFDIO_COPY of up to
// 512 pages from the device's frames. A process of another uid that only
// copies memory on a few threads (no lock of anyone's, no node opened)
// competes for the CPUs and the memory bus those copies need, and the
// kernel may take the daemon's thread off its CPU mid-copy. Charged
// their wall time, those copies spent a light victim's share, and a red
// team's memory-copy hog got it dropped and barred (4 runs of 4); the
// share now charges only what a call waited asleep (offCPU), and a call
// that was only slowed or preempted costs nothing.

func init() {
	strangerRoles["memhog"] = memHog
}

// memHog (arg: "threads MiB seconds") has each of threads threads copy a
// buffer of MiB to another, again and again, for seconds; says "ready"
// once the buffers are touched, and exits.
func memHog(_, arg string) error {
	var threads, mib, seconds int
	fmt.Sscan(arg, &threads, &mib, &seconds)
	runtime.GOMAXPROCS(threads + 1)
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	bufs := make([][2][]byte, threads)
	for i := range bufs {
		bufs[i] = [2][]byte{make([]byte, mib<<20), make([]byte, mib<<20)}
		for j := range bufs[i][0] {
			bufs[i][0][j] = byte(j)
		}
	}
	for i := range threads {
		go func() {
			runtime.LockOSThread()
			for time.Now().Before(end) {
				copy(bufs[i][1], bufs[i][0])
				copy(bufs[i][0], bufs[i][1])
			}
		}()
	}
	fmt.Println("ready")
	time.Sleep(time.Until(end))
	return nil
}

// TestMemoryCopyLoadBarsNoClient: a well-behaved client (uid
// 1000) goes round a paged 1 MiB allocation, 5 ms between laps — alone
// never judged — while a uid-65534 process copies RT_MEMHOG_THREADS
// (default 4) buffers of RT_MEMHOG_MIB (default 256) MiB each. It must
// not be dropped, nor its uid barred. RT_MEMHOG_THREADS=0 is the control;
// RT_MEMHOG_MIB=1 (buffers in the caches) tells the CPU from the memory
// bus.
func TestMemoryCopyLoadBarsNoClient(t *testing.T) {
	if raceDetector {
		t.Skip("under the race detector the hog copies too slowly to load anything (its 2 GiB are not ready in time)")
	}
	threads, mib := rtInt("RT_MEMHOG_THREADS", 4), rtInt("RT_MEMHOG_MIB", 256)
	underLoad(t, rtString("RT_VICTIM_ARG", "1 6 5ms"), "memhog", false, fmt.Sprintf("%d %d 10", threads, mib),
		fmt.Sprintf("a %d-thread memory-copy hog", threads))
}
