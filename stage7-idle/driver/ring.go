package driver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
)

// This file is the driver's side of the command rings: submission in
// batches, completion by the engine's head, and reaping.
//
// Per engine the driver writes the ring slots and RegDoorbell, and reads two
// things the engine writes: RegHead and the status array. Stage 4 takes the
// global lock off all of it: submitters reserve ring indices with one
// atomic add, write their slots and mark them written, and the doorbell
// moves over written slots only; each slot carries sequence words that say
// which command it may take next and which it holds. nolock.go holds that
// protocol and its invariants.
//
// Why reaping, and not the head, frees a slot. Once head passes command i,
// the engine is done with slot i&mask — but the status entry of i lives
// only until command i+size runs in the same slot and overwrites it. If
// the slot were reused as soon as head passed i, a waiter that was slow to
// look would read the status of i+size. So the status of i is copied into
// its request — reaped — before freeFor lets the slot take i+size: by the
// waiter of i, or by the submitter of i+size if it gets there first.
//
// Waiting takes no lock: a waiter waits for its fence (one atomic load per
// poll, or a sleep until the interrupt), then reaps its own commands.

// ring is the driver's state for one engine's command ring.
type ring struct {
	bank   uint64 // abi.EngineRegs(engine)
	slots  []byte // device.Ring: written by the driver
	status []byte // device.RingStatus: written by the engine
	size   uint64 // slots in the ring, a power of two
	mask   uint64 // size-1

	// Stage 4: the lock-free protocol's words; see nolock.go for who
	// writes each.
	counters                           // reserved, publishing, doorbell
	freeFor  []atomic.Uint64           // freeFor[i&mask] == i: slot i&mask may take command i
	written  []atomic.Uint64           // written[i&mask] == i: command i is fully written
	owner    []atomic.Pointer[request] // owner[i&mask]: the request of the command last written there

	engine abi.Engine // stage 7: whose doorbell this is, to wake it (idle.go)
}

// initRing takes engine e's ring as the device presents it: the size from
// RegRingSize, the memory from the device, and the tail from RegDoorbell —
// the reset value RingStart on a fresh device, or where an earlier driver
// left it. It waits until the head has caught up with that tail, so that
// every command in the ring is ours, and hands out indices from there.
func (d *Driver) initRing(e abi.Engine) error {
	size := d.regs.Load(abi.RegRingSize)
	if size == 0 || size&(size-1) != 0 {
		return fmt.Errorf("%w: RegRingSize reads %d, not a power of two", ErrNoDevice, size)
	}
	bank := abi.EngineRegs(e)
	tail := d.regs.Load(bank + abi.RegDoorbell)
	if d.regs.Load(bank+abi.RegHead) != tail && !d.waitPassed(bank, tail-1) {
		return ErrClosed
	}
	d.rings[e] = ring{
		engine: e,
		bank:   bank,
		slots:  d.dev.Ring(e),
		status: d.dev.RingStatus(e),
		size:   size,
		mask:   size - 1,
		owner:  make([]atomic.Pointer[request], size),
	}
	r := &d.rings[e]
	r.freeFor = make([]atomic.Uint64, size)
	r.written = make([]atomic.Uint64, size)
	r.reserved.Store(tail)
	r.doorbell = tail
	for i := tail; i != tail+size; i++ {
		r.freeFor[i&r.mask].Store(i)        // every slot is free for the first lap
		r.written[i&r.mask].Store(i - size) // and holds nothing written in it
	}
	return nil
}

// request is one submitted command, as the driver tracks it.
type request struct {
	op    abi.Opcode
	index uint64 // ring index

	// result is resultPending, then resultReaping while its one reaper
	// copies the status out, then resultDone|status (nolock.go, reap).
	result atomic.Uint64
}

// Pending is a batch of submitted commands on one engine. Wait for it to
// learn how they ended.
type Pending struct {
	d      *Driver
	engine abi.Engine
	ring   *ring
	last   uint64 // ring index of the last command; done when the head passes it
	fence  Fence  // signalled by the last command
	reqs   []request
	one    [1]request // reqs' storage for a batch of one (Submit), saving an allocation
}

// Len returns the number of commands in the batch.
func (p *Pending) Len() int { return len(p.reqs) }

// ANCHOR: submitbatch
// SubmitBatch places cmds on engine e's ring, in order and in consecutive
// slots, and rings the doorbell once for all of them — or, if the ring is
// too full for them, once per run of commands written before it had to
// wait for a slot. A full ring never drops or overwrites a command, and
// never fails a submission: the submitter waits. Each command goes into the
// ring with its ring index as its Seq (cmds itself is not modified, nor
// kept). SubmitBatch returns as soon as the last command is in the ring;
// Wait on the result learns how they ended.
//
// Any number of goroutines may call SubmitBatch at once, on the same engine
// too. It takes no lock and never waits for another submitter to finish
// (nolock.go); only a full ring makes it wait, for room. The engine runs
// commands in the order their indices were reserved, so one goroutine's
// batches run in the order it submitted them. A batch is in the ring when
// SubmitBatch returns, but the doorbell may not cover it yet: not while a
// submitter that reserved indices before it is still writing them. It is
// rung as soon as that submitter is done.
func (d *Driver) SubmitBatch(e abi.Engine, cmds []abi.Command) (*Pending, error) {
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	r := &d.rings[e]
	p := &Pending{d: d, engine: e, ring: r}
	if len(cmds) == 1 {
		p.reqs = p.one[:]
	} else {
		p.reqs = make([]request, len(cmds))
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	n := uint64(len(cmds))
	first := r.reserve(n)
	end := first + n
	if d.testHookReserved != nil {
		d.testHookReserved(e, first, n) // a test may stall the submitter here
	}
	unmarked := first // the batch's commands in [unmarked, i) are written, not yet marked
	for k, cmd := range cmds {
		i := first + uint64(k)
		if !r.slotFree(i) {
			// Full: mark and publish what is written, so the engine can
			// run it — the command this slot waits on may be this
			// batch's own, a lap back — then wait for the slot, reaping
			// as needed.
			r.mark(unmarked, i)
			d.publish(r)
			unmarked = i
			if !d.waitForSlot(r, i) {
				return nil, ErrClosed
			}
			// Free the rest of the batch's slots the engine has passed,
			// so that they are written and published together.
			d.reapPassed(r, i+1, end)
		}
		req := &p.reqs[k]
		req.op, req.index = cmd.Op, i
		cmd.Seq = i
		// Fences are the driver's: the batch's last command signals the
		// engine's timeline with its index+1 (fence.go), the end of the
		// reserved range.
		cmd.Flags &^= abi.FlagFence | abi.FlagInterrupt
		cmd.Fence = 0
		if i == end-1 {
			cmd.Flags |= abi.FlagFence | abi.FlagInterrupt
			cmd.Fence = end
		}
		// Plain stores into the slot: this submitter alone reserved i,
		// slot i&mask is free for it (freeFor), and nobody reads it
		// before mark below says it is written.
		cmd.Encode(r.slots[abi.SlotOffset(i, r.mask):])
		r.owner[i&r.mask].Store(req)
	}
	r.mark(unmarked, end)
	d.publish(r)
	p.last = end - 1
	p.fence = Fence{d: d, engine: e, value: end}
	return p, nil
}

// ANCHOR_END: submitbatch

// ANCHOR: wait
// waitPassed spins until engine bank's head has passed index i, and reports
// whether it did. It takes no lock. The comparison is wrap-safe:
// int64(head-i) > 0 reads "head is past i" even when the indices straddle
// 2^64, where head > i would not.
//
// If the driver is closed meanwhile, waitPassed closes the device — which
// waits for the engines to stop — and looks once more: false means the
// engine stopped before it finished command i. Either way, once waitPassed
// returns the engine is done with command i.
func (d *Driver) waitPassed(bank, i uint64) bool {
	checkEvery := d.yieldEvery
	if checkEvery < 0 { // never yield, but still notice Close
		checkEvery = 1024
	}
	passed := func() bool {
		// This load pairs with the engine's store to RegHead in complete.
		return int64(d.regs.Load(bank+abi.RegHead)-i) > 0
	}
	for polls := 1; ; polls++ {
		if passed() {
			return true
		}
		if polls%checkEvery != 0 {
			continue
		}
		if d.closed.Load() {
			d.dev.Close()
			return passed()
		}
		if d.yieldEvery > 0 {
			runtime.Gosched()
		}
	}
}

// Wait waits until every command of the batch has completed, and returns
// nil if all succeeded. Otherwise it returns the error of a batch of one as
// it is, and for a larger batch an errors.Join of one error per failed
// command, each naming its place in the batch; each wraps a *CommandError
// (and so its abi.Status), or is ErrClosed for a command that Close left
// unstarted. When Wait returns, the engine is done with every command of
// the batch. Wait may be called again, and from several goroutines.
func (p *Pending) Wait() error { return p.WaitContext(context.Background()) }

// Fence returns the fence the batch's last command signals.
func (p *Pending) Fence() Fence { return p.fence }

// WaitContext is Wait, except that it gives up when ctx is done and returns
// ctx.Err() (the commands go on; wait again to learn how they ended).
func (p *Pending) WaitContext(ctx context.Context) error {
	if len(p.reqs) == 0 {
		return nil
	}
	// The fence signals after the head has passed the last command, so the
	// wait for the head below is one load. ErrClosed is settled below,
	// command by command: the engines have stopped, and reaping finds which
	// commands they finished.
	if err := p.fence.Wait(ctx); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	p.d.waitPassed(p.ring.bank, p.last)
	p.collect()
	if len(p.reqs) == 1 {
		return p.errAt(0)
	}
	var errs []error
	for i := range p.reqs {
		if err := p.errAt(i); err != nil {
			errs = append(errs, fmt.Errorf("command %d of %d: %w", i, len(p.reqs), err))
		}
	}
	return errors.Join(errs...)
}

// ANCHOR_END: wait

// collect reaps every command of the batch the engine has run, or waits
// for the goroutine that has claimed it to finish. A command the engine
// never ran (Close stopped it first) stays unreaped: ErrClosed.
func (p *Pending) collect() {
	r := p.ring
	// This load pairs with the engine's store to RegHead in complete.
	head := p.d.regs.Load(r.bank + abi.RegHead)
	for i := range p.reqs {
		req := &p.reqs[i]
		if int64(head-req.index) <= 0 {
			break // not run, nor anything after it
		}
		r.reap(req)
		// Another reaper may hold the claim: it is between two stores.
		for req.result.Load()&resultDone == 0 {
			runtime.Gosched()
		}
	}
}

// Err returns the error of the batch's command i (nil if it succeeded),
// waiting for the batch first.
func (p *Pending) Err(i int) error {
	p.Wait()
	return p.errAt(i)
}

// errAt returns command i's error. The load pairs with the reaper's store
// of the result.
func (p *Pending) errAt(i int) error {
	req := &p.reqs[i]
	result := req.result.Load()
	status := abi.Status(uint32(result))
	switch {
	case result&resultDone == 0:
		return ErrClosed
	case status != abi.StatusOK:
		return &CommandError{Engine: p.engine, Op: req.op, Seq: req.index, Status: status}
	}
	return nil
}

// Doorbells returns how many times the driver has rung a doorbell (on
// either engine) since it was created.
func (d *Driver) Doorbells() uint64 { return d.doorbells.Load() }
