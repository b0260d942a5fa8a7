package softgpu_test

import (
	"testing"

	softgpu "softgpu/stage5-vm"
)

// BenchmarkCopyWait puts the two host waits of a pinned copy side by side
// in one process, so that one record holds both: the copies of
// BenchmarkH2D and BenchmarkD2H (mem=pinned), waited for
//
//	wait=default    at the driver's defaults: the sized wait
//	                (driver/estimate.go), which polls through the copy's
//	                expected completion, or blocks at once if that is more
//	                than MaxSizedPoll away
//	wait=poll150us  with a fixed poll budget of 150 µs, what the
//	                copies-polled record asks of every row through
//	                SOFTGPU_POLL_BUDGET=150000: longer than a 1 MiB copy
//	                takes here, so that copy never pays a wake-up
//
// In each pass the two rows of a size run one after the other, so a drift
// of the machine between passes falls on both; compare them within a pass.
// The question they answer is the cost of the default wait: at 1 MiB the
// default row should come within a few percent of the polled one, having
// polled about as long; at 16 MiB, far past MaxSizedPoll, the default
// sleeps at once and the polled wait polls 150 µs before it sleeps too.
// Each row also reports wakeups/op (reportWaits): how many of its copies'
// waits blocked, which is what the budget decides; and wakes/op, how many
// of its doorbells found the copy engine asleep, which the budget does not
// decide: the engine's own idle budget (50 µs) is about as long as the
// host's write of 1 MiB, so in some runs the engine sleeps before most
// copies and in others before almost none. Compare the rows' ns/op only
// where their wakes/op agree.
//
// SOFTGPU_POLL_BUDGET, when set, sets both rows' budget (openBench): a
// record made with it has no default row to compare.
func BenchmarkCopyWait(b *testing.B) {
	for _, dir := range []struct {
		name string
		dir  direction
	}{{"H2D", toDevice}, {"D2H", fromDevice}} {
		for _, n := range []int{1 << 20, 16 << 20} {
			size := "1MiB"
			if n == 16<<20 {
				size = "16MiB"
			}
			for _, w := range []struct {
				name   string
				budget uint64 // cycles of the device clock, which are nanoseconds; 0: the default
			}{{"default", 0}, {"poll150us", 150_000}} {
				b.Run("dir="+dir.name+"/size="+size+"/wait="+w.name, func(b *testing.B) {
					benchPinned(b, n, dir.dir, softgpu.Config{PollBudget: w.budget})
				})
			}
		}
	}
}
