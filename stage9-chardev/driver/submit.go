package driver

import (
	"fmt"

	"softgpu/stage9-chardev/abi"
)

// Submitting on a channel: a command goes into the slot of its ring index,
// and a store of the new tail to RegDoorbell hands every slot below it to
// the engine. Any number of goroutines submit at once, with no lock: they
// reserve indices with an atomic add, write and mark their slots, and
// whoever holds publishing moves the doorbell over every written slot
// (nolock.go has the protocol and its invariants).

// ANCHOR: submitbatch

// SubmitBatch places cmds on the channel's ring, in order and in
// consecutive slots, and rings the doorbell once for all of them — or, if
// the ring is too full for them, once per run of commands written before it
// had to wait for a slot. A full ring never drops or overwrites a command,
// and never fails a submission: the submitter waits. Each command goes into
// the ring with its ring index as its Seq (cmds itself is not modified, nor
// kept). SubmitBatch returns as soon as the last command is in the ring;
// Wait on the result learns how they ended.
//
// Any number of goroutines may call SubmitBatch at once. It takes no lock
// and never waits for another submitter to finish; only a full ring makes
// it wait, for room. The engine runs commands in the order their indices
// were reserved, so one goroutine's batches run in the order it submitted
// them. A batch is in the ring when SubmitBatch returns, but the doorbell
// may not cover it yet: not while a submitter that reserved indices before
// it is still writing them. It is rung as soon as that submitter is done.
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
	if err := ch.usable(); err != nil {
		return nil, err
	}
	if len(cmds) == 0 {
		return p, nil
	}
	n := uint64(len(cmds))
	first := ch.reserve(n)
	end := first + n
	if h := ch.hooks.Reserved; h != nil {
		h(ch.id) // a test or benchmark may stall the submitter here
	}
	unmarked := first // the batch's commands in [unmarked, i) are written, not yet marked
	for k := range cmds {
		i := first + uint64(k)
		if !ch.slotFree(i) {
			// Full: mark and publish what is written, so the engine can
			// run it — the command this slot waits on may be this
			// batch's own, a lap back — then wait for the slot. The
			// run published ends with a fence, so that the wait can
			// sleep until it signals (awaitSlot).
			if unmarked != i {
				ch.write(&cmds[k-1], i-1, true)
			}
			ch.markWritten(unmarked, i)
			ch.publish()
			unmarked = i
			if err := ch.awaitSlot(i); err != nil {
				return nil, err
			}
		}
		req := &p.reqs[k]
		req.op, req.index = cmds[k].Op, i
		ch.owner[i&ch.mask].Store(req)
		ch.write(&cmds[k], i, i == end-1)
	}
	ch.markWritten(unmarked, end)
	ch.publish()
	p.last = end - 1
	p.fence = Fence{ch: ch, value: end}
	return p, nil
}

// ANCHOR_END: submitbatch

// ANCHOR: submit

// Submit runs cmd on the channel and waits for it. It allocates nothing:
// the command has no request for a reaper to fill — instead of leaving its
// status for one, the caller reaps it itself, reading its completion entry
// and freeing its slot as soon as the engine is done. A command the device
// refuses comes back as a *CommandError; one with flag bits that are not
// defined is refused here, before it reaches the device.
func (ch *Channel) Submit(cmd abi.Command) error {
	if !abi.FlagsDefined(cmd.Flags) {
		return &CommandError{Engine: ch.engine, Op: cmd.Op, Status: abi.StatusBadFlags}
	}
	if err := ch.usable(); err != nil {
		return err
	}
	i := ch.reserve(1)
	if h := ch.hooks.Reserved; h != nil {
		h(ch.id) // a test or benchmark may stall the submitter here
	}
	if !ch.slotFree(i) {
		if err := ch.awaitSlot(i); err != nil {
			return err
		}
	}
	// No request: this goroutine reaps command i itself. The slot's owner
	// entry is nil already unless its last command was a batch's, and a
	// load leaves the entry's line shared where a store would take it from
	// the submitters of the slots beside it.
	if ch.owner[i&ch.mask].Load() != nil {
		ch.owner[i&ch.mask].Store(nil)
	}
	ch.write(&cmd, i, true)
	ch.markWritten(i, i+1)
	woke := ch.publish()
	status, err := ch.awaitCommand(i, ch.expect(cmd.Op, cmd.Size, woke))
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

// usable returns why nothing may be submitted on the channel now, or nil.
func (ch *Channel) usable() error {
	if ch.closed.Load() || ch.gone.Load() {
		return ErrClosed
	}
	if ch.unstarted.Load() { // before faultError: no page of it may be read yet (ChannelOptions.Start)
		return ErrNotStarted
	}
	return ch.faultError()
}

// fenced returns cmd, to go in at ring index i, with the driver's fence
// flags: fences are the driver's, so whatever cmd said is replaced. The
// last command of a batch (or a command submitted alone) signals the
// channel's timeline with i+1 and may interrupt; the others signal nothing.
func fenced(cmd abi.Command, i uint64, last bool) abi.Command {
	cmd.Flags &^= abi.FlagFence | abi.FlagInterrupt
	cmd.Fence = 0
	if last {
		cmd.Flags |= abi.FlagFence | abi.FlagInterrupt
		cmd.Fence = i + 1
	}
	return cmd
}

// write encodes cmd into slot i as command i of the ring, fenced if it is
// the last of its batch. Plain stores: this submitter alone reserved i,
// the slot is free (its previous command reaped), and the engine reads it
// only after the doorbell covers i, which needs the mark that comes after
// these stores. cmd comes by pointer and is copied once, here: a
// descriptor is seven words, and passed by value it was copied three times
// on the way (the range variable, fenced's argument, write's), for which
// FillStream at depths 16 and 256 ran 7-11% slower in a run of both in
// turns (a scratch run, in no record).
func (ch *Channel) write(cmd *abi.Command, i uint64, last bool) {
	c := fenced(*cmd, i, last)
	c.Seq = i
	if !ch.privileged {
		c.Ctx = ch.ctxID // a channel's commands run in its context, whatever they said
	}
	c.Encode(ch.slots[abi.SlotOffset(i, ch.mask):])
}
