package driver

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// evictSourceStress is TestManagedStress's burst/evict-source mode, the
// read-after-unmap of issue 32 through managed memory, where it matters
// most: an eviction frees its frames at once (the engines have answered
// its invalidation, so nothing may still name them) and the fault handler
// hands them to the next page in the same breath — an Unmap's frames, by
// contrast, wait for the work queued before it (deferred.go).
//
// Device memory holds about one COPY's source block and one destination
// block (two blocks and a little). One goroutine writes s on the host,
// COPYs a random tail of it into t (each one 2 MiB block; the COPY faults
// hundreds of pages of each in a burst, and the density prefetcher moves
// them whole) and checks t after Sync; the COPY's own faults evict. Another
// evicts s's block while the COPY reads it — evict's work, toHost's one
// ranged invalidation, with the victim chosen by the test, since neither
// policy would pick the block a COPY holds a run of at the moment that
// matters — and moves e, a third block, into the frames it freed.
//
// The copy engine's hook (device.Hooks.Resolved) builds the moment: when
// the engine has resolved a run of s whose destination is mapped, and the
// evictor is waiting, it lets the evictor go and holds the run until the
// eviction's invalidation is asked for (at most holdMax). When the engine
// has then resolved the destination run, and only if it answered an
// invalidation since it resolved the source run, the hook waits (at most
// reuseMax) for the source run's first frame to stop holding s's bytes —
// for the eviction that answer let go to copy the block back and give the
// frame to e — before the engine reads it. A correct engine never answers
// there (its safe points are between steps, device/mmu.go), so the wait
// costs the test nothing: the eviction it would wait for is itself waiting
// for this engine's answer. With the answer back inside translate and
// translateBack (the order before 0238f3a), this mode fails in its first
// copy round, e's bytes in t, 10 runs in 10.
func evictSourceStress(t *testing.T) {
	const size = blockPages << abi.PageShift // one block
	// The thrashing guard is off: s's pages move each time, never map remotely.
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: evictSourceMemory}, Config{Prefetch: PrefetchDensity, ThrashThreshold: -1})
	require.Less(t, d.DataSize(), uint64(3*size), "device data must not hold three blocks, or nothing is evicted")
	require.GreaterOrEqual(t, d.DataSize(), uint64(2*size), "device data must hold a source and a destination block")
	s, tt, e := allocManaged(t, c, size), allocManaged(t, c, size), allocManaged(t, c, size)
	fillPattern(e.Bytes(), 0xe) // what a reused frame would deliver
	cc, err := d.NewChannel(abi.EngineCopy, c, ChannelOptions{})
	require.NoError(t, err)
	const holdMax, reuseMax = 20 * time.Millisecond, time.Second
	kick := make(chan struct{})
	mem := d.hw.Memory()
	host := s.Bytes() // taken now: Bytes takes the lock an eviction holds while it waits for the engine
	ack := abi.EngineStatusPage(abi.EngineCopy) + abi.RegInvalAck
	var genAtSource, ackAtSource, srcPA uint64 // at the last source run; the hook's alone (the engine's goroutine)
	var srcPage []byte                         // s's bytes of the page srcPA holds
	var held, answered, reused int             // read after the engine's last command
	d.hw.(*device.Device).SetHooks(device.Hooks{Resolved: func(eng abi.Engine, va uint64, write bool) {
		if eng != abi.EngineCopy {
			return
		}
		if !write {
			genAtSource, ackAtSource, srcPA = d.regs.Load(abi.RegInvalGen), d.regs.Load(ack), 0
			if i := (va - s.VA()) >> abi.PageShift; va >= s.VA() && i < uint64(len(s.pages)) {
				if pte := loadPTE(d.vm.pool.mem, s.pages[i].pte); pte.Valid() && !pte.Host() {
					srcPA, srcPage = pte.Frame(), host[i<<abi.PageShift:(i+1)<<abi.PageShift]
				}
			}
			if srcPA == 0 || !loadPTE(d.vm.pool.mem, tt.pages[(va-s.VA())>>abi.PageShift].pte).Valid() {
				return // the destination would fault: the step would start again
			}
			select {
			case kick <- struct{}{}:
				held++
				for start := time.Now(); d.regs.Load(abi.RegInvalGen) == genAtSource && time.Since(start) < holdMax; {
				}
			default:
			}
			return
		}
		if d.regs.Load(ack) == ackAtSource || srcPA == 0 {
			return
		}
		answered++
		for start := time.Now(); time.Since(start) < reuseMax; {
			if !bytes.Equal(mem[srcPA:srcPA+1<<abi.PageShift], srcPage) {
				reused++
				return
			}
		}
	}})
	duration := 5 * time.Second
	if testing.Short() {
		duration = time.Second
	}
	before := d.ManagedStats()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rounds [2]int
	var copies atomic.Int64 // rounds[0], for the main goroutine to watch
	wg.Add(2)
	go func() { // the host writes s, the device copies it into t
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 10))
		for ; ; rounds[0]++ {
			select {
			case <-stop:
				return
			default:
			}
			seed := rng.Uint64()
			off := uint64(rng.IntN(blockPages/2)) << abi.PageShift
			i, ok := copyRound(t, cc, c, s, tt, seed, off, size-off)
			if !ok {
				return
			}
			if i >= 0 {
				t.Errorf("round %d: t[%d] = %#x after COPY of s[%d, +%d) and Sync; want %#x, s's (e's byte there is %#x)",
					rounds[0], off+uint64(i), tt.Bytes()[off+uint64(i)], off, size-off, s.Bytes()[off+uint64(i)], e.Bytes()[off+uint64(i)])
				return
			}
			copies.Add(1)
		}
	}()
	go func() { // s's block is evicted under the COPY, and e takes its frames, taking s's or t's frames
		defer wg.Done()
		for ; ; rounds[1]++ {
			select {
			case <-stop:
				return
			default:
			}
			if !assert.NoError(t, e.Sync()) {
				return
			}
			select {
			case <-stop:
				return
			case <-kick: // the copy engine holds a source run
			}
			// evict's work on s's block, the victim chosen here, then
			// the frames' next owner: the pool hands s's frames out first.
			d.um.mu.Lock()
			moved := d.toHost(s, 0, len(s.pages), false)
			d.um.stats.Evicted += uint64(moved)
			d.um.stats.Evictions++
			d.toDevice(e, 0, len(e.pages))
			d.um.mu.Unlock()
		}
	}()
	time.Sleep(duration)
	for deadline := time.Now().Add(managedWait); copies.Load() < 2 && !t.Failed() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // a loaded machine: at least two whole copy rounds
	}
	close(stop)
	wg.Wait()
	st := d.ManagedStats()
	t.Logf("rounds %v, source runs held for an eviction %d, invalidations answered while holding one %d (its frame reused before the read %d), stats %+v",
		rounds, held, answered, reused, st)
	if !t.Failed() && (rounds[0] < 2 || held == 0 || st.Evictions == before.Evictions) {
		t.Errorf("rounds %v, %d source runs held, %d evictions: the copies or the evictions under them never ran", rounds, held, st.Evictions-before.Evictions)
	}
}

// evictSourceMemory is the device memory of evictSourceStress: with the
// page-table pool taken out, room for two blocks and a little (4.67 MiB of
// data), not three.
const evictSourceMemory = 5 << 20
