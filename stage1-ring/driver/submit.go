package driver

import (
	"fmt"

	"softgpu/stage1-ring/abi"
)

// Submitting on a channel: a command goes into the slot of its ring index,
// and a store of the new tail to RegDoorbell hands every slot below it to
// the engine. Submitters take the global lock to claim indices and write
// their slots; they drop it as soon as the doorbell is rung, so that many
// commands are in flight while the lock still makes each ring
// single-writer.

// ANCHOR: submitbatch

// SubmitBatch places cmds on the channel's ring, in order, and rings the
// doorbell once for all of them — or, if the ring is too full for them,
// once per run of commands written before it had to wait for a slot. A
// full ring never drops or overwrites a command, and never fails a
// submission: the submitter waits. Each command goes into the ring with its
// ring index as its Seq (cmds itself is not modified, nor kept).
// SubmitBatch returns as soon as the last command is in the ring; Wait on
// the result learns how they ended.
func (ch *Channel) SubmitBatch(cmds []abi.Command) (*Pending, error) {
	for i := range cmds {
		if !abi.FlagsDefined(cmds[i].Flags) {
			return nil, fmt.Errorf("command %d of %d: %w", i, len(cmds),
				&CommandError{Engine: ch.engine, Op: cmds[i].Op, Status: abi.StatusBadFlags})
		}
	}
	p := &Pending{ch: ch}
	if len(cmds) == 1 {
		p.reqs = p.one[:]
	} else {
		p.reqs = make([]request, len(cmds))
	}
	ch.lock.Lock()
	defer ch.lock.Unlock()
	if err := ch.usableLocked(); err != nil {
		return nil, err
	}
	for k := range cmds {
		i, err := ch.claimLocked()
		if err != nil {
			return nil, err
		}
		req := &p.reqs[k]
		*req = request{op: cmds[k].Op, index: i}
		ch.owner[i&ch.mask] = req
		ch.writeLocked(cmds[k], i)
	}
	ch.ringLocked()
	if len(cmds) > 0 {
		p.last = p.reqs[len(p.reqs)-1].index
	}
	return p, nil
}

// ANCHOR_END: submitbatch

// ANCHOR: submit

// Submit runs cmd on the channel and waits for it. It allocates nothing:
// the command's request is this call's own, and instead of leaving its
// status for a reaper it reaps it itself — reads its completion entry and
// frees its slot — as soon as the engine is done. A command the device
// refuses comes back as a *CommandError; one with flag bits that are not
// defined is refused here, before it reaches the device.
func (ch *Channel) Submit(cmd abi.Command) error {
	if !abi.FlagsDefined(cmd.Flags) {
		return &CommandError{Engine: ch.engine, Op: cmd.Op, Status: abi.StatusBadFlags}
	}
	ch.lock.Lock()
	if err := ch.usableLocked(); err != nil {
		ch.lock.Unlock()
		return err
	}
	i, err := ch.claimLocked()
	if err != nil {
		ch.lock.Unlock()
		return err
	}
	ch.owner[i&ch.mask] = nil // no request: this goroutine reaps command i itself
	ch.writeLocked(cmd, i)
	ch.ringLocked()
	ch.lock.Unlock()
	status, err := ch.awaitCompleted(i)
	if err != nil {
		return err
	}
	ch.free(i)
	if status != abi.StatusOK {
		return &CommandError{Engine: ch.engine, Op: cmd.Op, Seq: i, Status: status}
	}
	return nil
}

// ANCHOR_END: submit

// usableLocked returns why nothing may be submitted on the channel now, or
// nil.
func (ch *Channel) usableLocked() error {
	if ch.closed.Load() {
		return ErrClosed
	}
	if err := ch.faultError(); err != nil {
		return err
	}
	if h := ch.hooks.Reserved; h != nil {
		h(ch.id) // a benchmark may stall the submitter here, holding the lock
	}
	return nil
}

// claimLocked returns the index the next command goes to, once its slot
// is free. If it is not — the ring is full — it rings the doorbell for
// what is written so far, so the engine can run it (the command the slot
// waits for may be this very batch's, a lap back), and waits for the slot
// without the lock, so that waiters and the other channel carry on. The
// index it returns is the tail when the lock is held again: another
// submitter may have gone first, and the batch then continues after its
// commands.
func (ch *Channel) claimLocked() (uint64, error) {
	for {
		i := ch.tail
		if ch.slotFree(i) {
			return i, nil
		}
		ch.reapPassedLocked(i - ch.size)
		if ch.slotFree(i) {
			return i, nil
		}
		ch.ringLocked()
		ch.lock.Unlock()
		err := ch.awaitSlot(i)
		ch.lock.Lock()
		if err != nil {
			return 0, err
		}
	}
}

// slotFree reports whether slot i&mask may take command i: the command it
// held a lap ago, i-size, has been reaped. This load pairs with the
// reaper's store of freeFor, which comes after its read of the status.
func (ch *Channel) slotFree(i uint64) bool { return ch.freeFor[i&ch.mask].Load() == i }

// writeLocked encodes cmd into slot i and moves the tail past it.
func (ch *Channel) writeLocked(cmd abi.Command, i uint64) {
	cmd.Seq = i
	// Plain stores into the slot: the engine reads it only after it
	// loads a tail above i, and the slot is free (its previous command
	// reaped), so nobody else touches it.
	cmd.Encode(ch.slots[abi.SlotOffset(i, ch.mask):])
	ch.tail = i + 1
}

// ringLocked stores the tail into RegDoorbell if it has moved since the
// last store.
func (ch *Channel) ringLocked() {
	if ch.rung == ch.tail {
		return
	}
	// This store publishes the slot writes before it; the engine's load
	// of RegDoorbell in fetch pairs with it.
	ch.regs.Store(ch.doorbell+abi.RegDoorbell, ch.tail)
	ch.rung = ch.tail
	ch.doorbells.Add(1)
	if h := ch.hooks.Published; h != nil {
		h(ch.id) // a benchmark may run the engine's side here (device/stepped.go)
	}
}

// awaitSlot waits until slot i&mask has been freed for command i — or
// for a later one: while this submitter waited without the lock, another
// may have claimed index i and moved on, and then the caller takes the
// tail afresh. It reaps the slot's previous command under the lock if a
// batch's waiter has not come for it. It returns an error if the device
// stops or the channel faults first.
func (ch *Channel) awaitSlot(i uint64) error {
	freed := func() bool { return int64(ch.freeFor[i&ch.mask].Load()-i) >= 0 }
	return ch.spin(func() bool {
		if freed() {
			return true
		}
		if previous := i - ch.size; ch.completed(previous) {
			ch.lock.Lock()
			ch.reapPassedLocked(previous)
			ch.lock.Unlock()
		}
		return freed()
	})
}
