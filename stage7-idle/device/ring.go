package device

import (
	"fmt"
	"math/bits"

	"softgpu/stage7-idle/abi"
)

// This file is the engine's side of the command ring (the layout is in
// abi/ring.go): fetch and complete, the two pieces of pollLoop that stage 0
// did with a mailbox. Per engine:
//
//	ring         RingSize slots, written by the driver, read by the engine
//	status       RingSize entries, written by the engine, read by the driver
//	RegDoorbell  the tail, written by the driver
//	RegHead      the head, written by the engine; Engine.head is the
//	             engine's own copy, and the register only ever follows it
//
// Invariants, with indices free-running and differences taken mod 2^64:
//   - 0 <= tail-head <= RingSize: the driver never runs more than a ring
//     ahead of the engine (the driver checks; the engine trusts it);
//   - the engine runs every index exactly once, in index order, and
//     publishes head = i+1 only after command i's status is in place;
//   - the engine reads slot i&mask only while head <= i < tail, the window
//     in which the driver leaves that slot alone.

// DefaultRingSize is the ring size of a zero Config: 256 slots, 16 KiB.
const DefaultRingSize = 256

// MaxRingSize bounds Config.RingSize: 65536 slots, 4 MiB of ring per engine.
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

// resetRing gives engine e an empty ring starting at cfg.RingStart: head and
// tail both there, as a real device comes out of reset. It runs in Open,
// before the engine and any driver exist.
func (d *Device) resetRing(e abi.Engine) {
	d.rings[e] = alignedBytes(int(d.cfg.RingSize * abi.CommandSize))
	d.statuses[e] = alignedBytes(int(d.cfg.RingSize * abi.StatusEntrySize))
	bank := abi.EngineRegs(e)
	d.regs.Store(bank+abi.RegHead, d.cfg.RingStart)
	d.regs.Store(bank+abi.RegDoorbell, d.cfg.RingStart)
}

// ANCHOR: ring
// fetch returns the next command in the ring, if the driver has published
// one, with its ring index. It loads the doorbell only when every command
// below the tail it saw last has run: a batch costs the engine one load of
// the driver's cache line, not one per command. Indices are compared only
// for equality, which the wrap at 2^64 cannot break.
func (e *Engine) fetch() (desc []byte, index uint64, ok bool) {
	if e.head == e.tail {
		// This load pairs with the driver's store to RegDoorbell in
		// driver.SubmitBatch: seeing a new tail means the slot writes that
		// preceded that store are visible, so the slots up to it can be
		// decoded.
		e.tail = e.dev.regs.Load(e.bank + abi.RegDoorbell)
		if e.head == e.tail {
			return nil, 0, false
		}
	}
	if e.dev.stopping.Load() {
		return nil, 0, false // a closing engine starts nothing new; see Device.Close
	}
	return e.ring[abi.SlotOffset(e.head, e.mask):][:abi.CommandSize], e.head, true
}

// complete publishes the status of command index — the one fetch returned —
// and hands its slot back to the driver.
func (e *Engine) complete(index uint64, status abi.Status) {
	abi.PutStatus(e.status[abi.StatusOffset(index, e.mask):], status)
	e.head = index + 1
	// This store publishes the status written just above; the driver's
	// loads of RegHead (in waitPassed, and before it reaps) pair with it. It is made
	// per command, not once per batch, so that a waiter returns as soon as
	// its own command is done.
	e.dev.regs.Store(e.bank+abi.RegHead, e.head)
}

// ANCHOR_END: ring
