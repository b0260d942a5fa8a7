package driver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of lock-free submission (nolock.go). The tests of the ring
// (ring_test.go) all still run, and now run lock-free too.

// TestManySubmittersOneRing is the stress test: eight goroutines submit
// batches of random length to both engines at once, several batches in
// flight each, on rings large and small — smaller than a batch — and
// across the 2^64 and 2^32 wraps. Every command's effect is checked:
//
//   - on the copy engine each submitter runs a chain: command c fills its
//     scratch word with the byte c/2 (c even) or copies the scratch word
//     into its log at c/2 (c odd). A fill and the copy after it often sit in
//     different batches, so if two of the submitter's batches ran out of
//     order, or a command was lost, a log entry holds the wrong value;
//   - on the compute engine each ADD32 adds one to the submitter's own
//     counter, so a lost or doubled command shows in the count; every
//     seventh is misaligned on purpose and must fail — alone, and with its
//     own status, however many commands ran in its slot since.
func TestManySubmittersOneRing(t *testing.T) {
	perSubmitter := 3000
	if testing.Short() {
		perSubmitter = 600
	}
	tests := []struct {
		name      string
		ringSize  uint64
		ringStart uint64
		commands  int // per submitter
	}{
		{"ring=256", 256, 0, perSubmitter},
		{"ring=4", 4, 0, perSubmitter},
		{"ring=1", 1, 0, perSubmitter / 4}, // every command waits for the one before: slow on 2 cores
		{"ring=4/across=2^64", 4, 1<<64 - 200, perSubmitter},
		{"ring=16/across=2^32", 16, 1<<32 - 200, perSubmitter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openRing(t, device.Config{RingSize: tt.ringSize, Start: tt.ringStart})
			const submitters = 8
			var wg sync.WaitGroup
			for w := range submitters {
				wg.Go(func() { submitChains(t, d, w, tt.commands) })
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for w := range submitters {
				checkChains(t, d, w, tt.commands)
			}
		})
	}
}

// Memory of submitter w in the stress test: a counter, a scratch word and a
// log of 8-byte entries.
func counterOf(w int) uint64 { return AllocBase + 64*uint64(w) }
func scratchOf(w int) uint64 { return AllocBase + 4096 + 64*uint64(w) }
func logOf(w int) uint64     { return AllocBase + 8192 + 16384*uint64(w) }

// submitChains submits perSubmitter commands, about half to each engine,
// as submitter w, keeping up to three batches in flight per engine, and
// checks each batch's errors.
func submitChains(t testing.TB, d *Driver, w, perSubmitter int) {
	rng := rand.New(rand.NewPCG(uint64(w), 4))
	type inFlight struct {
		p   *Pending
		bad []bool // bad[k]: command k was made to fail
	}
	var queues [abi.NumEngines][]inFlight
	settle := func(f inFlight) bool {
		f.p.Wait()
		for k, bad := range f.bad {
			err := f.p.Err(k)
			if bad && !errors.Is(err, abi.StatusMisaligned) || !bad && err != nil {
				t.Errorf("submitter %d, fence %#x, command %d of %d: Err = %v; want misaligned: %v", w, f.p.Fence().Value(), k, len(f.bad), err, bad)
				return false
			}
		}
		return true
	}
	var chain, adds int // commands sent so far on each engine
	for chain+adds < perSubmitter {
		e := abi.Engine(rng.IntN(abi.NumEngines))
		batch := make([]abi.Command, 1+rng.IntN(6))
		bad := make([]bool, len(batch))
		for k := range batch {
			if e == abi.EngineCopy {
				if chain%2 == 0 {
					batch[k] = abi.Command{Op: abi.OpFill, Dst: scratchOf(w), Size: 8, Value: uint64(chain / 2)}
				} else {
					batch[k] = abi.Command{Op: abi.OpCopy, Src: scratchOf(w), Dst: logOf(w) + 8*uint64(chain/2), Size: 8}
				}
				chain++
				continue
			}
			batch[k] = abi.Command{Op: abi.OpAdd32, Dst: counterOf(w), Size: 4, Value: 1}
			if adds%7 == 6 {
				batch[k].Dst += 2 // misaligned: StatusMisaligned, and no add
				bad[k] = true
			}
			adds++
		}
		p, err := d.SubmitBatch(e, batch)
		if !assert.NoError(t, err, "submitter %d: SubmitBatch", w) {
			return
		}
		queues[e] = append(queues[e], inFlight{p, bad})
		if len(queues[e]) == 3 {
			if !settle(queues[e][0]) {
				return
			}
			queues[e] = queues[e][1:]
		}
	}
	for _, q := range queues {
		for _, f := range q {
			if !settle(f) {
				return
			}
		}
	}
}

// checkChains checks submitter w's memory after submitChains.
func checkChains(t testing.TB, d *Driver, w, perSubmitter int) {
	t.Helper()
	// Replay the submitter's choices to learn how many commands went to
	// each engine.
	rng := rand.New(rand.NewPCG(uint64(w), 4))
	var chain, adds, goodAdds int
	for chain+adds < perSubmitter {
		e := abi.Engine(rng.IntN(abi.NumEngines))
		for range 1 + rng.IntN(6) {
			if e == abi.EngineCopy {
				chain++
				continue
			}
			if adds%7 != 6 {
				goodAdds++
			}
			adds++
		}
	}
	counter := make([]byte, 4)
	d.CopyFromDevice(counter, counterOf(w))
	assert.Equal(t, uint32(goodAdds), binary.LittleEndian.Uint32(counter), "submitter %d's counter; want %d (ADD32s lost or run twice)", w, goodAdds)
	log := make([]byte, 8*(chain/2))
	d.CopyFromDevice(log, logOf(w))
	for k := range chain / 2 {
		if !assert.Equal(t, bytes.Repeat([]byte{byte(k)}, 8), log[8*k:8*k+8], "submitter %d's log entry %d: its commands ran out of order, or one was lost", w, k) {
			return
		}
	}
}

// TestStalledSubmitter parks one submitter between reserving its indices
// and writing them, with the test hook, while seven others submit behind
// it, each keeping two batches in flight (on a ring with room for them
// all: a full ring would make them wait for the stalled one's slots). Their
// SubmitBatch calls must return — a submitter never waits for another to
// finish — but the doorbell must not pass the stalled submitter's first
// index (the engine would read a slot nobody wrote), so none of their
// commands may run, and their Waits wait. Once it resumes, everyone finishes and every
// command ran exactly once. A second case closes the driver during the
// stall: every call must return.
func TestStalledSubmitter(t *testing.T) {
	for _, closeDuringStall := range []bool{false, true} {
		t.Run(fmt.Sprintf("close=%v", closeDuringStall), func(t *testing.T) {
			const others, perOther = 7, 50
			d := openRing(t, device.Config{RingSize: 32, Start: 1<<64 - 5})
			var stalledAt atomic.Uint64
			parked, resume := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(resume) })
			defer release() // if the test fails before it resumes the submitter
			var armed atomic.Bool
			armed.Store(true)
			ch := d.channels[abi.DefaultChannel(abi.EngineCompute)].Load()
			d.SetHooks(Hooks{Reserved: func(abi.Channel) {
				if armed.CompareAndSwap(true, false) { // the first submitter, alone so far: the one to stall
					stalledAt.Store(ch.reserved.Load() - 3)
					close(parked)
					<-resume
				}
			}})
			add := func(w int) abi.Command {
				return abi.Command{Op: abi.OpAdd32, Dst: counterOf(w), Size: 4, Value: 1}
			}
			results := make(chan error, others+1)
			go func() {
				p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{add(others), add(others), add(others)})
				if err == nil {
					err = p.Wait()
				}
				results <- err
			}()
			<-parked
			var submitted atomic.Int64 // SubmitBatch calls of the others that returned
			for w := range others {
				go func() {
					var queue []*Pending
					for range perOther {
						p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{add(w)})
						if err != nil {
							results <- err
							return
						}
						submitted.Add(1)
						if queue = append(queue, p); len(queue) == 2 {
							if err := queue[0].Wait(); err != nil {
								results <- err
								return
							}
							queue = queue[1:]
						}
					}
					results <- queue[0].Wait()
				}()
			}
			// Each of the others submits two batches, then waits for the
			// first, which cannot run: both SubmitBatch calls must return.
			// (10 s is slack for a loaded machine, not a speed requirement:
			// a submitter that waited for the stalled one would never return.)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.GreaterOrEqual(c, submitted.Load(), int64(2*others), "submissions returned while one submitter was stalled")
			}, 10*time.Second, 100*time.Microsecond)
			time.Sleep(2 * time.Millisecond) // let a wrongly rung doorbell reach the engine
			first := stalledAt.Load()
			if tail := d.regs.Load(ch.doorbell + abi.RegDoorbell); int64(tail-first) > 0 {
				t.Errorf("doorbell at %#x while a submitter is stalled before writing index %#x", tail, first)
			}
			for w := range others + 1 {
				c := make([]byte, 4)
				d.CopyFromDevice(c, counterOf(w))
				if n := binary.LittleEndian.Uint32(c); n != 0 {
					t.Errorf("submitter %d's counter = %d during the stall; want 0: a command behind the stalled one ran", w, n)
				}
			}
			if closeDuringStall {
				d.Close()
			}
			release()
			deadline := time.After(10 * time.Second)
			for i := range others + 1 {
				select {
				case err := <-results:
					if err != nil && !(closeDuringStall && errors.Is(err, ErrClosed)) {
						t.Errorf("a submitter returned %v", err)
					}
				case <-deadline:
					t.Fatalf("%d of %d submitters still running 10 s after the stall ended", others+1-i, others+1)
				}
			}
			if closeDuringStall {
				return
			}
			for w := range others + 1 {
				want := uint32(perOther)
				if w == others {
					want = 3
				}
				c := make([]byte, 4)
				d.CopyFromDevice(c, counterOf(w))
				assert.Equal(t, want, binary.LittleEndian.Uint32(c), "submitter %d's counter", w)
			}
		})
	}
}

// TestFencesFollowReservations: a batch's fence is the end of the range it
// reserved, so batches of any length from any goroutine get fences that
// differ by exactly their lengths, in the order they ran.
func TestFencesFollowReservations(t *testing.T) {
	d := openRing(t, device.Config{RingSize: 16, Start: 1<<64 - 20})
	const submitters, batches = 4, 40
	type issued struct{ fence, n uint64 }
	got := make(chan issued, submitters*batches)
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Go(func() {
			for b := range batches {
				n := 1 + (w+b)%5
				batch := make([]abi.Command, n)
				for k := range batch {
					batch[k].Op = abi.OpNop
				}
				p, err := d.SubmitBatch(abi.EngineCopy, batch)
				if !assert.NoError(t, err) {
					return
				}
				if !assert.NoError(t, p.Wait()) {
					return
				}
				got <- issued{p.Fence().Value(), uint64(n)}
			}
		})
	}
	wg.Wait()
	close(got)
	starts := map[uint64]uint64{} // first index → fence
	var total uint64
	for is := range got {
		starts[is.fence-is.n] = is.fence
		total += is.n
	}
	// Walking from the ring's start, each range must begin where the last
	// ended: no gap, no overlap.
	for at, covered := uint64(1<<64-20), uint64(0); covered < total; {
		end, ok := starts[at]
		if !ok {
			t.Fatalf("no batch starts at index %#x after %d of %d commands: ranges overlap or leave a gap", at, covered, total)
		}
		covered += end - at
		at = end
	}
}

// TestNoLostPublish is the stress test of publish's look after the
// release. Four goroutines submit one command each at the same moment,
// over and over, while the test hook holds publishing for 50 µs after
// every doorbell: the others mark their slots and find publishing taken.
// Whoever holds it must publish them on its way out; a command left
// behind shows as a Wait that never ends, with the doorbell short of what
// was reserved.
func TestNoLostPublish(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	d := openRing(t, device.Config{})
	d.SetHooks(Hooks{Publishing: func(abi.Channel) { time.Sleep(50 * time.Microsecond) }})
	ch := d.channels[abi.DefaultChannel(abi.EngineCopy)].Load()
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				<-start
				p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpNop}})
				if !assert.NoError(t, err) {
					return
				}
				// 5 s is slack for a loaded machine under -race; a lost
				// publish waits forever.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := p.WaitContext(ctx); err != nil {
					t.Errorf("round %d: Wait = %v with the doorbell at %#x and %#x reserved: a marked command was never published",
						round, err, d.regs.Load(ch.doorbell+abi.RegDoorbell), ch.reserved.Load())
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// TestPinnedLookupWhileRegionsChange: copies find their pinned region in a
// snapshot (pinnedSpans), without pinMu. Four goroutines copy to and from
// their own pinned regions while another allocates and frees regions
// around them: every copy must take the pinned path and move the right
// bytes, and under -race this checks that a snapshot is never written
// after it is published.
func TestPinnedLookupWhileRegionsChange(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	d := openPinned(t, device.Config{}, Config{})
	const workers, size = 4, 4096
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		// Every entry the churn frees retires only once the commands
		// queued before its free have run, and here HostAlloc waits at
		// most retireWait for one (bound.go), then says ErrNoWindow and
		// that it may be tried again. On a loaded machine, under -race,
		// the workers' copies can keep every freed entry retiring that
		// long; so a timed-out HostAlloc is tried again, but not for
		// ever: entries that never retire are a leak.
		timeouts := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := d.HostAlloc(size)
			if errors.Is(err, ErrNoWindow) && errors.Is(err, ErrTimeout) && timeouts < 50 {
				timeouts++
				continue
			}
			if !assert.NoError(t, err, "after %d HostAllocs in a row timed out waiting for an entry to retire", timeouts) {
				return
			}
			timeouts = 0
			if !assert.NoError(t, d.HostFree(p)) {
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		region := hostAlloc(t, d, size)
		wg.Go(func() {
			dst := uint64(AllocBase + w*size)
			for round := range rounds {
				want := patterned(size, byte(w*rounds+round))
				copy(region.Bytes(), want)
				if _, ok := d.pinnedBus(region.Bytes()); !ok {
					t.Errorf("worker %d round %d: its pinned region is missing from the snapshot", w, round)
					return
				}
				if !assert.NoError(t, d.CopyToDevice(dst, region.Bytes()), "worker %d round %d: CopyToDevice", w, round) {
					return
				}
				clear(region.Bytes())
				if !assert.NoError(t, d.CopyFromDevice(region.Bytes(), dst), "worker %d round %d: CopyFromDevice", w, round) {
					return
				}
				if !assert.Equal(t, want, region.Bytes(), "worker %d round %d: read back differs at byte %d", w, round, firstDifference(region.Bytes(), want)) {
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	churn.Wait()
}
