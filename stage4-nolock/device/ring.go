package device

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"softgpu/stage4-nolock/abi"
	"softgpu/stage4-nolock/trace"
)

// This file is the engine's side of a channel's rings (the layout is in
// abi/ring.go): fetch and complete, the two pieces of pollLoop that deal
// with the channel. Per channel:
//
//	submission ring   RingSize slots, written by the driver, read by the engine
//	completion ring   RingSize entries, written by the engine, read by the driver
//	RegDoorbell       the tail, written by the driver
//	chanState.head    the next index to run, private to the engine serving it
//	chanState.tail    the last doorbell value fetched, private likewise
//
// The engine trusts no value the driver wrote: every doorbell is checked
// against the head before anything below it is read.
//
// Invariants, with indices free-running and differences taken mod 2^64:
//   - 0 <= tail-head <= RingSize, for the tail the engine has accepted: a
//     doorbell that would break this faults the channel instead;
//   - the engine runs every index below the accepted tail exactly once, in
//     index order, and writes completion i&mask — status, then index —
//     only after command i is done;
//   - the engine reads slot i&mask only while head <= i < tail, the window
//     in which the driver leaves that slot alone, and reads it once.

// DefaultRingSize is the ring size of a zero Config: 256 entries, 16 KiB of
// submission ring.
const DefaultRingSize = 256

// MaxRingSize bounds Config.RingSize: 65536 slots, 4 MiB of ring per channel.
const MaxRingSize = 1 << 16

// checkRingConfig fills in the default ring size and rejects one that is not
// a power of two (the mask would not pick a slot) or is too large.
func checkRingConfig(cfg *Config) error {
	if cfg.RingSize == 0 {
		cfg.RingSize = DefaultRingSize
	}
	if bits.OnesCount64(cfg.RingSize) != 1 || cfg.RingSize > MaxRingSize {
		return fmt.Errorf("%w: RingSize %d is not a power of two in [1, %d]", ErrConfig, cfg.RingSize, MaxRingSize)
	}
	return nil
}

// ANCHOR: chanstate

// chanState is one channel as the device keeps it: its pages and rings,
// and the indices only the engine serving it touches. d.chans holds one per
// channel; each engine serves one, abi.DefaultChannel(id), as its Engine.cur,
// and no other goroutine reads or writes it once Open has started the
// engines.
type chanState struct {
	id          abi.Channel
	doorbell    uint64          // abi.DoorbellPage(id)
	status      uint64          // abi.ChannelStatusPage(id)
	ring        []byte          // the submission ring, written by the driver
	completions []atomic.Uint64 // the completion ring, written by the engine
	head, tail  uint64          // the next index to run; the last doorbell value accepted
	faulted     bool            // RegChannelFault is set: the channel is not served again
}

// ANCHOR_END: chanstate

// resetRing gives channel c empty rings starting at cfg.Start, as a real
// device comes out of reset: the doorbell at Start, and every completion
// entry holding the index one lap before the first that will use it, so
// that every index below Start reads as completed and none at or above it.
func (d *Device) resetRing(c abi.Channel) {
	size, mask := d.cfg.RingSize, d.cfg.RingSize-1
	d.rings[c] = alignedBytes(int(size * abi.CommandSize))
	d.completions[c] = alignedWords(int(size * abi.CompletionWords))
	for i := d.cfg.Start; i != d.cfg.Start+size; i++ {
		d.completions[c][abi.CompletionWord(i, mask)].Store(i - size)
	}
	d.regs.Store(abi.DoorbellPage(c)+abi.RegDoorbell, d.cfg.Start)
	d.chans[c] = chanState{id: c, doorbell: abi.DoorbellPage(c), status: abi.ChannelStatusPage(c),
		ring: d.rings[c], completions: d.completions[c], head: d.cfg.Start, tail: d.cfg.Start}
}

// ANCHOR: ring

// fetch takes the next command of the ring, if the driver has published
// one: it decodes the descriptor out of its slot into the engine's job, so
// that nothing the driver writes afterwards can change a command half-way
// through its checks. It loads the doorbell only when every command below
// the tail it saw last has run: a batch costs the engine one load of the
// driver's line, not one per command.
func (e *Engine) fetch() bool {
	c := e.cur
	if c.faulted {
		return false
	}
	if c.head == c.tail {
		// This load pairs with the driver's store to RegDoorbell:
		// seeing a new tail means the slot writes that preceded that
		// store are visible, so the slots up to it can be copied.
		tail := e.regs.Load(c.doorbell + abi.RegDoorbell)
		if tail == c.tail {
			return false
		}
		if !e.accept(tail) {
			return false
		}
	}
	if e.stopRequested() {
		return false // a stopping engine starts nothing new
	}
	e.take()
	return true
}

// accept checks a doorbell value of the channel being served and makes it
// the tail, or faults the channel. The doorbell is input: a tail behind the
// head, or more than a ring ahead of it, would make the engine replay stale
// slots or run ~2^64 garbage ones. (tail-head wraps to a huge number for a
// tail behind the head, so one comparison catches both.)
func (e *Engine) accept(tail uint64) bool {
	c := e.cur
	if tail-c.head > e.ringSize {
		e.fault(abi.FaultDoorbell, tail)
		return false
	}
	c.tail = tail
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindDoorbell, Start: e.dev.clock.Now(), Engine: e.id, Channel: c.id, Arg: tail})
	}
	return true
}

// take copies the command at the head of the channel being served into
// the engine's job; the caller has checked that head is below the tail.
func (e *Engine) take() {
	c := e.cur
	e.job.load(c.ring[abi.SlotOffset(c.head, e.mask):][:abi.CommandSize], c.head)
	c.head++
	if e.trace != nil {
		e.job.start = e.dev.clock.Now()
	}
}

// complete publishes the status of the command fetch took into its
// completion entry.
func (e *Engine) complete(status abi.Status) {
	e.record(status)
	completions := e.cur.completions
	w := abi.CompletionWord(e.job.seq, e.mask)
	// The status word is stored for every command, although most end as
	// the one a lap before them in this entry did (StatusOK). Skipping an
	// unchanged one would take a load first, and this is the line the
	// host is polling for the index below: by the time the engine gets
	// here the host has read it since the engine last wrote it, and on
	// the development machine that load cost 10-25 ns a round trip
	// against about 3 for the locked store (XCHG on amd64) it saved
	// (scratch runs when this was written, in no record). Nor
	// may the engine remember what it last stored here: whoever owns the
	// ring may rewrite its entries, as stage 9's daemon does at a handover.
	completions[w+1].Store(uint64(status))
	// This store publishes the status word above; the driver's loads of
	// the entry's index pair with it.
	// It is made per command, not once per batch, so that a waiter
	// returns as soon as its own command is done.
	completions[w].Store(e.job.seq)
}

// ANCHOR_END: ring

// record traces the command just executed.
func (e *Engine) record(status abi.Status) {
	if e.trace == nil {
		return
	}
	c := &e.job.cmd
	e.trace.Record(trace.Event{Kind: trace.KindCommand, Start: e.job.start, End: e.dev.clock.Now(), Engine: e.id,
		Channel: e.cur.id, Op: c.Op, Status: uint8(status), Seq: e.job.seq, Size: traceSize(c)})
}

// traceSize is what a trace shows as a command's size: its bytes, or for
// DELAY its cycles.
func traceSize(c *abi.Command) uint64 {
	if c.Op == abi.OpDelay {
		return c.Value
	}
	return c.Size
}
