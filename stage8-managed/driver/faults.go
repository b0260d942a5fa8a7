package driver

import (
	"runtime"
	"slices"
	"sync"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/internal/spin"
	"softgpu/stage8-managed/trace"
)

// The fault handler: the driver's half of replayable faults (the device's
// is device/fault.go, the protocol abi/managed.go). One goroutine, started
// with the driver, reads the fault buffer in batches:
//
//	read the records in the ring, and hand their slots back (RegFaultGet)
//	sort them by context and page, drop the duplicates and the stale ones
//	coalesce the pages by 2 MiB block of their allocation, and move each
//	  block's faulted pages, with what the prefetch policy adds around
//	  them, in one migration (blocks.go, managed.go)
//	replay: store RegFaultReplay, and wake an engine that sleeps
//
// and then polls the buffer for faultPollBudget before it blocks: a fault
// that comes soon after a replay — the next small command's, another
// channel's — finds a handler that is still looking, and pays no
// interrupt and no wake-up. (Before fault bursts, a sequential copy
// faulted again as soon as the engine reached the end of the window just
// moved, and that was every fault after its first. A burst now names up to
// 2 MiB, and a single large copy faults again only after the engine has
// copied it, longer than the budget: Managed/prefetch=16/size=16MiB takes
// 8 batches and 6.8 ms per op in the managed record at 885b3ad.) This is idle
// gating's trade made on the driver's side, with its need-wakeup
// handshake: before it blocks, it stores RegFaultNeedIrq = 1 and looks
// once more.
//
// A record names a page that was not resident when the engine looked; by
// the time the handler reads it, another record (or a prefetch) may have
// moved it, or the allocation may be gone. Neither is an error: the
// replay lets the command try again, and it finds the page, or faults
// for good on an entry that is no longer managed.

const (
	// The ring: an eighth of the page-table pool, between one record per
	// channel and faultBufMax records. A faulting channel records a burst
	// (device/burst.go): every non-resident page of the next faultBurst
	// bytes of its operand, up to four times each — 2048 records for a
	// 2 MiB burst. A ring too small for a burst keeps its first records
	// (every page once, then the duplicates); the device drops the rest,
	// and the replay makes the channel fault on what is still missing.
	// A batch is the whole ring.
	faultBufMin     = abi.NumChannels
	faultBufMax     = 4096    // 128 KiB
	faultBurst      = 2 << 20 // RegFaultBurst: a 2 MiB block's worth
	faultPollBudget = 50_000  // 50 µs of polling after a batch
)

// faultBufRecords returns the ring's size for a page-table pool of pool
// bytes: a power of two in [faultBufMin, faultBufMax].
func faultBufRecords(pool uint64) uint64 {
	n := uint64(faultBufMin)
	for n < faultBufMax && 2*n*abi.FaultRecordSize <= pool/8 {
		n *= 2
	}
	return n
}

// faults is the fault buffer's state, the handler's alone once started.
type faults struct {
	base         uint64 // the ring's PA
	size         uint64 // the ring's records, a power of two
	get          uint64 // records read, ever
	overSeen     uint64 // RegFaultOverflow when last read
	overflowBase uint64 // RegFaultOverflow when the driver was made
	replayGen    uint64 // the last generation stored to RegFaultReplay
	recs         []abi.FaultRecord
	kick         chan struct{} // the interrupt handler's nudge; capacity 1
	stop         chan struct{} // closed when the interrupt thread ends (the device stopped, or Close)
	stopOnce     sync.Once
	running      sync.WaitGroup
}

// initFaults sets up the fault buffer in the page-table pool (memory no
// context maps) and starts the handler.
func (d *Driver) initFaults(cfg Config) error {
	u := &d.um
	u.allocs = map[abi.Context][]*Managed{}
	u.chunks = map[uint64]int{}
	u.policy, u.window = cfg.Prefetch, cfg.PrefetchPages
	u.threshold = max(cfg.ThrashThreshold, 0)
	u.density, u.eviction = cfg.PrefetchDensity, cfg.Eviction
	size := faultBufRecords(d.memSize - schedArea - d.vm.dataSize)
	base, err := d.vm.pool.table(size * abi.FaultRecordSize)
	if err != nil {
		return err
	}
	f := &u.faults
	f.base, f.size = base, size
	// A device an earlier driver used has its counts where it left them:
	// start from them.
	f.get = d.regs.Load(abi.RegFaultPut)
	f.overSeen = d.regs.Load(abi.RegFaultOverflow)
	f.overflowBase = f.overSeen
	f.replayGen = d.regs.Load(abi.RegFaultReplay)
	f.recs = make([]abi.FaultRecord, 0, size)
	d.regs.Store(abi.RegFaultGet, f.get)
	d.regs.Store(abi.RegFaultBufSize, size)
	d.regs.Store(abi.RegFaultBurst, faultBurst)
	d.regs.Store(abi.RegFaultNeedIrq, 1)
	d.regs.Store(abi.RegFaultBufBase, base) // last: from here the device may write records
	f.kick, f.stop = make(chan struct{}, 1), make(chan struct{})
	f.running.Add(1)
	go d.faultLoop()
	return nil
}

// stopFaults stops the handler and waits for it (Close, after the device
// has stopped). The interrupt thread stops it too, when the line closes:
// a device closed under a driver that is never closed leaves no handler
// behind.
func (d *Driver) stopFaults() {
	d.um.stopOnce.Do(func() { close(d.um.stop) })
	d.um.running.Wait()
}

// faultLoop is the handler's life: block until the interrupt handler
// kicks it, serve faults until the buffer has been quiet for the poll
// budget, block again.
func (d *Driver) faultLoop() {
	defer d.um.running.Done()
	for {
		select {
		case <-d.um.kick:
		case <-d.um.stop:
			return
		}
		d.regs.Store(abi.RegFaultNeedIrq, 0) // polling: no interrupts needed
		d.serveFaults()
	}
}

// ANCHOR: serve

// serveFaults serves batches while they come, and returns once the buffer
// has been empty for faultPollBudget, with RegFaultNeedIrq set again.
func (d *Driver) serveFaults() {
	var quietSince uint64
	polled := false // the first batch came with an interrupt; later ones were found by polling
	yield := spin.NewCadence(d.yieldEvery)
	for polls := 1; ; polls++ {
		if d.serveBatch(polled) {
			quietSince, polls, polled = 0, 0, true
			continue
		}
		if yield.Due(polls) {
			runtime.Gosched()
		}
		if polls%64 != 0 {
			continue
		}
		if d.stopped() {
			return
		}
		now := d.Now()
		if quietSince == 0 {
			quietSince = now
		} else if now-quietSince >= faultPollBudget {
			// About to block. The store pairs with the device's load
			// after its store of RegFaultPut; the look below is the
			// re-check that makes a lost fault impossible.
			d.regs.Store(abi.RegFaultNeedIrq, 1)
			if !d.serveBatch(true) {
				return
			}
			d.regs.Store(abi.RegFaultNeedIrq, 0)
			quietSince, polls = 0, 0
		}
	}
}

// ANCHOR_END: serve

// ANCHOR: batch

// serveBatch reads one batch of records and serves it, and reports whether
// there was anything to serve.
func (d *Driver) serveBatch(polled bool) bool {
	f := &d.um.faults
	put := d.regs.Load(abi.RegFaultPut) // pairs with the device's store after it wrote the record
	over := d.regs.Load(abi.RegFaultOverflow)
	if put == f.get && over == f.overSeen {
		return false
	}
	start := d.Now()
	n := put - f.get
	if n > f.size {
		// More records than the ring holds: the count is not to be
		// believed. Skip them; the replay makes every stalled channel
		// fault again, into a ring that is empty.
		f.get, n = put, 0
	}
	mem := d.hw.Memory()
	recs := f.recs[:0]
	for k := range n {
		at := f.base + (f.get+k)%f.size*abi.FaultRecordSize
		if r, ok := abi.DecodeFaultRecord(mem[at:]); ok { // the buffer is memory: a malformed record is skipped
			recs = append(recs, r)
		}
	}
	f.get += n
	f.overSeen = over
	d.regs.Store(abi.RegFaultGet, f.get) // the slots are the device's again
	if h := d.hooks.FaultsRead; h != nil {
		h()
	}
	// Sort by context and page, so duplicates are neighbours and each
	// allocation's pages are served in address order.
	slices.SortFunc(recs, func(a, b abi.FaultRecord) int {
		if a.Context != b.Context {
			return int(a.Context) - int(b.Context)
		}
		return cmpU64(a.VA>>abi.PageShift, b.VA>>abi.PageShift)
	})
	u := &d.um
	u.mu.Lock()
	var pages, dups, stale uint64
	faulted := u.faulted[:0]
	for i, r := range recs {
		if i > 0 && r.Context == recs[i-1].Context && r.VA>>abi.PageShift == recs[i-1].VA>>abi.PageShift {
			dups++
			continue
		}
		pages++
		m := d.lookupManaged(r.Context, r.VA)
		if m == nil || m.freed {
			continue // freed since: the replay finds the entry cleared, and the command fails
		}
		idx := int((r.VA - m.va) >> abi.PageShift)
		if r.Timestamp <= m.pages[idx].changed {
			// The page has moved since the engine recorded the fault, or
			// the allocation was made or synced since: the record is
			// stale. It may be one the handler reads only after its
			// command finished and the host took the page back with
			// Sync — moving the page now would put a snapshot on the
			// device while the host goes on writing its own copy. A
			// command still stalled on the page is not lost: the replay
			// below resumes it, and it faults again if it must. (No
			// later than, not before: two reads of the clock may agree,
			// and a record wrongly called stale costs only a replay.)
			stale++
			continue
		}
		faulted = append(faulted, faultedPage{m, idx})
	}
	migrated := d.serveBlocks(faulted) // blocks.go
	u.faulted = faulted
	u.stats.Faults += uint64(len(recs))
	u.stats.Duplicates += dups
	u.stats.Stale += stale
	u.stats.Batches++
	if polled {
		u.stats.Polled++
	}
	d.replay()
	u.mu.Unlock()
	if d.trace != nil {
		d.trace.Record(trace.Event{Kind: trace.KindFaultBatch, Start: start, End: d.Now(), Arg: uint64(len(recs)), Size: pages, Seq: migrated})
	}
	return true
}

// ANCHOR_END: batch

// ANCHOR: window

// window returns the pages to move for a fault on page idx of m: the first
// and how many, by the prefetch policy. The fixed window is aligned to its
// size, so a sequential access fills whole windows and each lands in one
// chunk of frames; the adaptive one starts at the fault and doubles while
// faults follow on from the last window.
func (d *Driver) window(m *Managed, idx int) (int, int) {
	u := &d.um
	switch u.policy {
	case PrefetchOff:
		return idx, 1
	case PrefetchAdaptive:
		if idx == m.next && m.window > 0 {
			m.window = min(2*m.window, maxAdaptive)
		} else {
			m.window = u.window
		}
		m.next = idx + m.window
		return idx, m.window
	}
	first := idx - idx%u.window
	return first, u.window
}

// ANCHOR_END: window

// ANCHOR: replay

// replay asks every engine to serve its stalled channels again. The
// caller holds um.mu. The store of RegFaultReplay is the doorbell of a
// stalled channel, and the wake-up follows idle gating's need-wakeup
// handshake: the engine stores RegNeedWakeup = 1 and then loads
// RegFaultReplay before it sleeps (device/idle.go, anyWork); this stores
// the generation and then loads the flag. A spinning engine sees the
// generation at its next poll and is not woken. Nor is an asleep engine
// that holds no channel stalled (RegStalled 0): a replay has nothing for
// it, and a wake would cost it a wake-up and its idle spin for nothing.
// Its 1 was stored before the records this replay answers, which were
// read before this store (abi/managed.go has the argument).
func (d *Driver) replay() {
	f := &d.um.faults
	f.replayGen++
	d.regs.Store(abi.RegFaultReplay, f.replayGen)
	d.um.stats.Replays++
	for e := range abi.Engine(abi.NumEngines) {
		status := abi.EngineStatusPage(e)
		if d.regs.Load(status+abi.RegNeedWakeup) != 0 && d.regs.Load(status+abi.RegStalled) != 0 {
			d.hw.WakeEngine(e)
		}
	}
}

// ANCHOR_END: replay
