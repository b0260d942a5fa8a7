package driver

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"softgpu/stage3-pinned/abi"
)

// This file is the driver's side of the command rings: submission in
// batches, completion by the engine's head, and reaping.
//
// Per engine the driver writes the ring slots and RegDoorbell, and reads two
// things the engine writes: RegHead and the status array. It keeps, under
// Driver.mu:
//
//	tail    its shadow of RegDoorbell: the index the next command goes to
//	reaped  every command below it has had its status copied out
//	owner   owner[i&mask] is the request of command i, for reaped <= i < tail
//
// Invariants (free-running indices, differences mod 2^64):
//   - reaped <= head <= tail <= reaped+size, that is
//     head-reaped <= tail-reaped <= size, where head is RegHead;
//   - the driver writes slot i&mask only for i-reaped < size: a slot is
//     reused only after the status of its previous command was copied out.
//
// Why reaping, and not the head, frees a slot. Once head passes command i,
// the engine is done with slot i&mask — but the status entry of i lives
// only until command i+size runs in the same slot and overwrites it. If
// the driver reused the slot as soon as head passed i, a waiter that was
// slow to look would read the status of i+size. So the statuses of
// [reaped, head) are copied into their requests, under the lock, before
// reaped moves: by whichever goroutine gets there first — a waiter whose
// command completed, or a submitter that finds the ring full.
//
// Waiting takes no lock: a waiter spins on RegHead, one atomic load per
// poll, until the head has passed its last command, and only then takes the
// lock to reap and read its statuses. That is what lets many commands be in
// flight at once while one global lock still guards the tails.

// ring is the driver's state for one engine's command ring.
type ring struct {
	bank   uint64 // abi.EngineRegs(engine)
	slots  []byte // device.Ring: written by the driver
	status []byte // device.RingStatus: written by the engine
	size   uint64 // slots in the ring, a power of two
	mask   uint64 // size-1

	// Guarded by Driver.mu.
	tail   uint64     // shadow of RegDoorbell: the next index to fill
	reaped uint64     // statuses of every index below it are copied out
	owner  []*request // owner[i&mask] is command i's request, for reaped <= i < tail
}

// initRing takes engine e's ring as the device presents it: the size from
// RegRingSize, the memory from the device, and the tail from RegDoorbell —
// the reset value RingStart on a fresh device, or where an earlier driver
// left it. It waits until the head has caught up with that tail, so that
// every command in the ring is ours, and starts reaping from there.
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
		bank:   bank,
		slots:  d.dev.Ring(e),
		status: d.dev.RingStatus(e),
		size:   size,
		mask:   size - 1,
		tail:   tail,
		reaped: tail,
		owner:  make([]*request, size),
	}
	return nil
}

// freeLocked returns how many slots may be written now. Unsigned arithmetic is
// right across the wrap: tail-reaped is the distance, whatever the values.
func (r *ring) freeLocked() uint64 { return r.size - (r.tail - r.reaped) }

// request is one submitted command, as the driver tracks it.
type request struct {
	op    abi.Opcode
	index uint64 // ring index

	// Guarded by Driver.mu; written once, by reapLocked.
	done   bool
	status abi.Status
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

	// Guarded by Driver.mu.
	waited bool
	err    error // Wait's result, fixed once waited is set
}

// Len returns the number of commands in the batch.
func (p *Pending) Len() int { return len(p.reqs) }

// ANCHOR: submitbatch
// SubmitBatch places cmds on engine e's ring, in order, and rings the
// doorbell once for all of them — or, if they do not fit in the free slots,
// once per run of commands that fits, waiting for the engine to free more
// in between. A full ring never drops or overwrites a command, and never
// fails a submission: the submitter waits. Each command goes into the ring
// with its ring index as its Seq (cmds itself is not modified, nor kept).
// SubmitBatch returns as soon as the last command is in the ring; Wait on
// the result learns how they ended.
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return nil, ErrClosed
	}
	for next := 0; next < len(cmds); {
		if r.freeLocked() < uint64(len(cmds)-next) {
			d.reapLocked(r)
		}
		if r.freeLocked() == 0 {
			// Full: wait for the engine to pass the oldest unreaped
			// command, without the lock, so waiters and submitters to
			// the other engine carry on. Then reap and look again.
			oldest := r.reaped
			d.mu.Unlock()
			passed := d.waitPassed(r.bank, oldest)
			d.mu.Lock()
			if !passed || d.closed.Load() {
				return nil, ErrClosed
			}
			continue
		}
		n := min(r.freeLocked(), uint64(len(cmds)-next))
		for range n {
			req := &p.reqs[next]
			cmd := cmds[next]
			cmd.Seq = r.tail
			// Fences are the driver's: the batch's last command signals
			// the engine's timeline with its index+1 (fence.go).
			cmd.Flags &^= abi.FlagFence | abi.FlagInterrupt
			cmd.Fence = 0
			if next == len(cmds)-1 {
				cmd.Flags |= abi.FlagFence | abi.FlagInterrupt
				cmd.Fence = r.tail + 1
			}
			*req = request{op: cmd.Op, index: r.tail}
			// Plain stores into the slot: the engine reads it only after
			// it loads a tail above r.tail, and slot r.tail&mask was
			// reaped (the invariant above), so nobody else touches it.
			cmd.Encode(r.slots[abi.SlotOffset(r.tail, r.mask):])
			r.owner[r.tail&r.mask] = req
			r.tail++
			next++
		}
		// This store publishes the slot writes above; the engine's load
		// of RegDoorbell in fetch pairs with it.
		d.regs.Store(r.bank+abi.RegDoorbell, r.tail)
		d.doorbells.Add(1)
	}
	p.last = r.tail - 1
	p.fence = Fence{d: d, engine: e, value: r.tail}
	return p, nil
}

// ANCHOR_END: submitbatch

// ANCHOR: reap
// reapLocked copies the statuses of the commands the engine has completed
// since the last reap into their requests, and frees their slots.
func (d *Driver) reapLocked(r *ring) {
	// This load pairs with the engine's store to RegHead in complete: every
	// status entry below head is visible, and stays put until the driver
	// writes the slot again, which it does only after this reap.
	head := d.regs.Load(r.bank + abi.RegHead)
	if head-r.reaped > r.tail-r.reaped {
		panic(fmt.Sprintf("driver: invariant reaped <= head <= tail broken: reaped %#x, head %#x, tail %#x", r.reaped, head, r.tail))
	}
	for ; r.reaped != head; r.reaped++ {
		req := r.owner[r.reaped&r.mask]
		req.status = abi.LoadStatus(r.status[abi.StatusOffset(r.reaped, r.mask):])
		req.done = true
		r.owner[r.reaped&r.mask] = nil
	}
}

// ANCHOR_END: reap

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
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.waited {
		return p.err
	}
	p.d.reapLocked(p.ring)
	p.waited = true
	if len(p.reqs) == 1 {
		p.err = p.errLocked(0)
		return p.err
	}
	var errs []error
	for i := range p.reqs {
		if err := p.errLocked(i); err != nil {
			errs = append(errs, fmt.Errorf("command %d of %d: %w", i, len(p.reqs), err))
		}
	}
	p.err = errors.Join(errs...)
	return p.err
}

// ANCHOR_END: wait

// Err returns the error of the batch's command i (nil if it succeeded),
// waiting for the batch first.
func (p *Pending) Err(i int) error {
	p.Wait()
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return p.errLocked(i)
}

func (p *Pending) errLocked(i int) error {
	req := &p.reqs[i]
	switch {
	case !req.done:
		return ErrClosed
	case req.status != abi.StatusOK:
		return &CommandError{Engine: p.engine, Op: req.op, Seq: req.index, Status: req.status}
	}
	return nil
}

// Doorbells returns how many times the driver has rung a doorbell (on
// either engine) since it was created.
func (d *Driver) Doorbells() uint64 { return d.doorbells.Load() }
