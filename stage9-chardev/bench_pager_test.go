package softgpu_test

import (
	"testing"
	"time"

	"softgpu/stage9-chardev/client"
)

// BenchmarkManagedPager times what the host pays to read managed memory
// the device has just written, across the boundary: a daemon in another
// process (this binary in its daemon role), the client in this one. The
// device FILLs 1 MiB (untimed); then, timed:
//
//	touch=dense/path=pager    the host reads every line; each page faults,
//	                          and the daemon (server/pager.go) brings it back
//	touch=dense/path=sync     MANAGED_SYNC of the whole range, then the same reads
//	touch=sparse/path=pager   the host reads one page in 256 (one page of the 1 MiB)
//	touch=sparse/path=sync    MANAGED_SYNC of the whole range, then that one page
//
// ns/op is the timed part of one operation; us/page is the same per page
// the host touched. fill-us/op is the device's side, untimed in ns/op: the
// FILL that starts each round, from its submission to its fence, which
// moves to the device the pages the host's touch brought back — every
// page (dense, or sparse after the Sync), or the one page (sparse, with
// the pager) — write-protecting, copying and punching out each run of
// them (driver/managed.go, moveRun; server/punch.go). It is a new family: BenchmarkManagedHost keeps
// measuring the in-process Sync path.
//
// Every round measures a migration, as a program that touches its data
// now and then would see one: after each round the benchmark waits out
// the thrashing guard's lapse (driver.Managed: a page that moves to the
// device again within 500 µs of its last move counts toward the guard),
// untimed, and before the timed part it requires that no page is mapped
// remotely. Without the pause, the rounds of path=pager follow one
// another within the lapse, the guard maps the touched pages remotely,
// and the host's touch finds its page at home with no fault at all —
// what 95 % of the rounds measured before the pause was added.
func BenchmarkManagedPager(b *testing.B) {
	const n = 1 << 20
	node := startDaemon(b)
	for _, touch := range []struct {
		name  string
		pages int // touched, from page 0, with stride 256/pages
	}{{"dense", n >> 12}, {"sparse", 1}} {
		for _, path := range []string{"pager", "sync"} {
			b.Run("touch="+touch.name+"/path="+path, func(b *testing.B) {
				g, err := client.Dial(node)
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				m, err := g.AllocManaged(n)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Free()
				if !m.Paged() {
					b.Skip("the daemon does not page this allocation (userfaultfd not permitted?)")
				}
				host := m.Bytes()
				stride := (n >> 12) / touch.pages << 12
				var timed, fill time.Duration
				ops := 0
				for b.Loop() {
					f0 := time.Now()
					if err := g.Fill(m.Ptr(), n, byte(ops)); err != nil {
						b.Fatal(err)
					}
					fill += time.Since(f0)
					if _, remote := m.Resident(); remote != 0 {
						b.Fatalf("%d pages mapped remotely after the device's fill: the host's touch would not migrate them", remote)
					}
					t0 := time.Now()
					if path == "sync" {
						if err := m.Sync(); err != nil {
							b.Fatal(err)
						}
					}
					for p := 0; p < touch.pages; p++ {
						sink += consume(host[p*stride : p*stride+4096])
					}
					timed += time.Since(t0)
					if host[0] != byte(ops) {
						b.Fatalf("the host reads %#x after the device filled %#x", host[0], byte(ops))
					}
					ops++
					time.Sleep(thrashLapse) // untimed: the next round's moves are not a thrash
				}
				per := float64(timed.Nanoseconds()) / float64(ops)
				b.ReportMetric(per, "ns/op")
				b.ReportMetric(per/1e3/float64(touch.pages), "us/page")
				b.ReportMetric(float64(fill.Microseconds())/float64(ops), "fill-us/op")
			})
		}
	}
}

// thrashLapse is longer than the driver's thrashing lapse (500 µs of the
// device clock, which is the host's monotonic clock): moves of a page to
// the device further apart than that never count toward the guard.
const thrashLapse = time.Millisecond
