package softgpu_test

import (
	"errors"
	"os"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// BenchmarkBoundary measures the same four operations on either side of
// the process boundary, in one run:
//
//	op=roundtrip       one NOP submitted and waited for (RoundTrip's loop)
//	op=fillstream256   64-byte fills, 256 in flight (FillStream's loop)
//	op=h2d1MiB         1 MiB the host just wrote, copied by one COPY from
//	                   registered host memory (H2D/mem=pinned's loop)
//	op=wake3ms         one NOP submitted after the host slept 3 ms, so the
//	                   engine is asleep (Gap/gap=3ms's loop, with a NOP):
//	                   what waking an engine costs on each side. ns/op is
//	                   the median of the NOPs alone, with percentiles
//
// path=inproc is an in-process device; path=node is a daemon in another
// process (this binary again, in its daemon role) and a client in this
// one. Both use a channel of a context of its own, beside the engine's
// default channel on the runlist — what a client gets — so the two rows
// differ in the boundary alone. Besides time, node rows report msgs/op,
// the socket messages the daemon received from the client per operation
// (its CLIENT_INFO count, read before and after), kicks/op, the
// client's kicks of a sleeping engine (FUTEX_WAKE on a doorbell word
// since uapi 2.2, eventfd writes before; device/kick.go), and sleeps/op,
// the client's waits that slept and were woken (a second wake across the
// boundary, the engine's futex wake of the fence word: GPU.Sleeps).
// wake3ms also reports cores, the client process's CPU over its loop
// (3 ms of each operation asleep), which is what a wait that polls
// instead of sleeping costs. The seed's sentence is the
// claim under test: submission stores into the mapped ring and rings the
// doorbell; it does not ioctl.
func BenchmarkBoundary(b *testing.B) {
	for _, op := range []struct {
		name string
		// setup allocates what the loop needs and returns the loop, so
		// that msgs/op counts the loop's messages alone.
		setup func(b *testing.B, t *target) func(b *testing.B)
	}{
		{"roundtrip", func(b *testing.B, t *target) func(b *testing.B) {
			return func(b *testing.B) {
				b.ReportAllocs()
				m := startMeter()
				for b.Loop() {
					if err := t.nop(); err != nil {
						b.Fatal(err)
					}
				}
				m.report(b)
			}
		}},
		{"fillstream256", func(b *testing.B, t *target) func(b *testing.B) {
			dst := t.alloc(b, 64*256)
			return func(b *testing.B) { streamFills(b, t.batch(), dst, 256, t.doorbells) }
		}},
		{"wake3ms", func(b *testing.B, t *target) func(b *testing.B) {
			return func(b *testing.B) {
				var lat latencies
				m := startMeter()
				for b.Loop() {
					sleepFor(3 * time.Millisecond)
					start := time.Now()
					if err := t.nop(); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				m.report(b)
				lat.report(b)
			}
		}},
		{"h2d1MiB", func(b *testing.B, t *target) func(b *testing.B) {
			const n = 1 << 20
			dst := t.alloc(b, n)
			host, src := t.host(b, n)
			return func(b *testing.B) {
				measureCopies(b, host, toDevice, func() error { return t.copy(dst, src, n) })
			}
		}},
	} {
		for _, path := range []string{"inproc", "node"} {
			b.Run("op="+op.name+"/path="+path, func(b *testing.B) {
				t := openTarget(b, path)
				loop := op.setup(b, t)
				calls := t.calls()
				kicks, sleeps := t.kicks(), t.sleeps()
				loop(b)
				if path == "node" {
					b.ReportMetric(float64(t.calls()-calls)/float64(b.N), "msgs/op")
					b.ReportMetric(float64(t.kicks()-kicks)/float64(b.N), "kicks/op")
					b.ReportMetric(float64(t.sleeps()-sleeps)/float64(b.N), "sleeps/op")
				}
			})
		}
	}
}

// target is one side of the boundary, as the Boundary loops use it.
type target struct {
	nop       func() error
	batch     func() *softgpu.Batch
	copy      func(dst, src softgpu.Ptr, n uint64) error
	alloc     func(b *testing.B, n uint64) softgpu.Ptr
	host      func(b *testing.B, n uint64) ([]byte, softgpu.Ptr)
	doorbells func() uint64
	calls     func() uint64 // messages the daemon has had from this client
	kicks     func() uint64
	sleeps    func() uint64 // waits that slept and were woken (GPU.Sleeps)
}

// openTarget opens path's device: in-process, or a daemon in another
// process and a client of it.
func openTarget(b *testing.B, path string) *target {
	zero := func() uint64 { return 0 }
	if path == "inproc" {
		g := openBench(b, softgpu.Config{MemorySize: 64 << 20})
		b.Cleanup(func() { g.Close() })
		ctx, err := g.NewContext()
		if err != nil {
			b.Fatal(err)
		}
		ch, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityNormal})
		if err != nil {
			b.Fatal(err)
		}
		return &target{
			nop: ch.Nop, batch: ch.NewBatch, copy: ch.Copy, doorbells: g.Doorbells, calls: zero, kicks: zero, sleeps: zero,
			alloc: func(b *testing.B, n uint64) softgpu.Ptr {
				p, err := ctx.Alloc(n)
				if err != nil {
					b.Fatal(err)
				}
				return p
			},
			host: func(b *testing.B, n uint64) ([]byte, softgpu.Ptr) {
				h, err := g.HostAlloc(n)
				if errors.Is(err, softgpu.ErrPinLimit) {
					b.Skip(err)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { g.HostFree(h) })
				va, err := ctx.Map(h, 0)
				if err != nil {
					b.Fatal(err)
				}
				return h.Bytes(), va
			},
		}
	}
	withCanary(b)
	node := startDaemon(b)
	var cfg softgpu.Config
	pollBudgetFromEnv(b, &cfg) // the client's waits poll as the in-process host's do
	g, err := client.DialConfig(client.Config{Node: node, PollBudget: cfg.PollBudget})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	ctl, err := client.DialControl(node)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctl.Close() })
	return &target{
		nop:   func() error { return g.Nop(softgpu.Copy) },
		batch: func() *softgpu.Batch { return g.NewBatch(softgpu.Copy) },
		copy:  g.Copy, doorbells: g.Doorbells, kicks: g.Kicks, sleeps: g.Sleeps,
		calls: func() uint64 { return clientCalls(b, ctl, g) },
		alloc: func(b *testing.B, n uint64) softgpu.Ptr {
			p, err := g.Alloc(n)
			if err != nil {
				b.Fatal(err)
			}
			return p
		},
		host: func(b *testing.B, n uint64) ([]byte, softgpu.Ptr) {
			h, err := g.HostAlloc(n)
			if errors.Is(err, uapi.ErrNoMemory) {
				b.Skip(err) // the daemon could not pin it
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { g.HostFree(h) })
			return h.Bytes(), h.Ptr()
		},
	}
}

// clientCalls returns the messages the daemon has received from g: its
// CLIENT_INFO entry is the one with this process's pid and g's context.
func clientCalls(b *testing.B, ctl *client.Control, g *client.GPU) uint64 {
	clients, err := ctl.Clients()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range clients {
		if c.Pid == uint32(os.Getpid()) && c.Context == uint32(g.Context()) {
			return c.Calls
		}
	}
	b.Fatalf("the daemon lists no client with pid %d and context %d", os.Getpid(), g.Context())
	return 0
}

// BenchmarkClients is small-command throughput with n client processes,
// each submitting batches of eight 64-byte fills on its own copy channel
// and waiting for each batch, against one daemon: Channels' loop, with
// the channels in different processes. ns/op is per fill, across all
// clients, timed from the moment every client is connected and told to go
// until the last is done. (No cores figure: the work is in other
// processes, which this one's meter does not see.)
func BenchmarkClients(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run("n="+itoa(n), func(b *testing.B) {
			withCanary(b)
			node := startDaemon(b)
			kids := make([]*child, n)
			for i := range kids {
				ops := b.N / n
				if i == 0 {
					ops += b.N % n
				}
				kids[i] = startRole(b, roleClient+"="+node, roleOps+"="+itoa(ops))
			}
			b.ResetTimer()
			start := time.Now()
			for _, k := range kids {
				if _, err := k.stdin.Write([]byte("go\n")); err != nil {
					b.Fatal(err)
				}
			}
			for _, k := range kids {
				k.expect(b, "done")
			}
			b.StopTimer()
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/op")
			for _, k := range kids {
				k.stop(b)
			}
		})
	}
}
