// Package trace records what the device did, for readers and for
// debugging: a bounded ring of fixed-size events, stamped with the device
// clock (cycles, which are nanoseconds), written by the engines and the
// driver, and dumped as Chrome trace-event JSON (json.go), the format
// Perfetto and chrome://tracing open.
//
// Tracing is off unless a Buffer is given to the device. Off costs one
// predictable branch per event site: every site reads
//
//	if t := e.trace; t != nil { t.Record(...) }
//
// and, on, a Record is an atomic add and a store of one event.
//
// Invariants:
//   - Record never blocks and never allocates: when the ring is full the
//     oldest events are overwritten, and Dropped counts them;
//   - events are read (Events, WriteJSON) only after every writer is done —
//     the device closed — so reading takes no lock.
package trace

import (
	"slices"
	"sync/atomic"

	"softgpu/stage8-managed/abi"
)

// Kind is what an event records.
type Kind uint8

const (
	// KindCommand is one command, from the engine taking it to its
	// completion: Start and End, Engine, Channel, Op, Status, Seq, Size.
	KindCommand Kind = iota + 1
	// KindDoorbell is the engine seeing a new doorbell value (Arg) on
	// Channel, at Start.
	KindDoorbell
	// KindFault is the engine faulting Channel: Arg is the abi.ChannelFault.
	KindFault
	// KindStop is an engine stopping.
	KindStop
	// KindIRQRaise is an engine raising the interrupt line, at Start:
	// Arg is the cause, Channel the channel whose fence it was.
	KindIRQRaise
	// KindIRQHandled is the driver's interrupt thread handling the line:
	// Start to End, Arg the causes it found.
	KindIRQHandled
	// KindSleep is an engine asleep, from parking (Start) to running
	// again (End); Arg is the wake latency, cycles from the driver's wake
	// call to the engine running (huge if it was not woken by a call).
	KindSleep
	// KindTLBMiss is a walk of the page tables for the VA in Seq; Arg is
	// the abi.Fault it found, or 0.
	KindTLBMiss
	// KindTLBInvalidate is an engine handling invalidation request Arg.
	KindTLBInvalidate
	// KindPageFault is a translation fault at the VA in Seq; Arg is the
	// abi.Fault.
	KindPageFault
	// KindPreempt is a slice of a command that ended in preemption: Start
	// to End, Engine, Channel, Op, Seq; Arg is its cursor when it stopped.
	KindPreempt
	// KindSwitch is an engine switching to Channel, at Start; Arg is the
	// channel it left.
	KindSwitch
	// KindRunlist is an engine handling runlist submit Arg (a generation);
	// Status is the abi.RunlistError kind, 0 if it accepted it.
	KindRunlist
	// KindStall is an engine stalling Channel on a replayable fault at the
	// VA in Seq, at Start, after writing its fault records (Size: how many;
	// Arg: how many were dropped because the buffer was full).
	KindStall
	// KindReplay is an engine seeing replay generation Arg, at Start, and
	// serving its stalled channels again.
	KindReplay
	// KindFaultBatch is the driver's fault handler serving one batch: Start
	// to End, Arg the records it read, Size the distinct pages they named,
	// Seq the pages it migrated to the device for them (prefetch included).
	KindFaultBatch
	// KindMigrate is the driver moving Arg pages of managed memory, Start
	// to End: to the device (Status 0) or back to the host (Status 1).
	KindMigrate
)

var kindNames = [...]string{
	KindCommand:       "command",
	KindDoorbell:      "doorbell",
	KindFault:         "fault",
	KindStop:          "stop",
	KindIRQRaise:      "irq raise",
	KindIRQHandled:    "irq handled",
	KindSleep:         "sleep",
	KindTLBMiss:       "tlb miss",
	KindTLBInvalidate: "tlb invalidate",
	KindPageFault:     "page fault",
	KindPreempt:       "preempt",
	KindSwitch:        "switch",
	KindRunlist:       "runlist",
	KindStall:         "stall",
	KindReplay:        "replay",
	KindFaultBatch:    "fault batch",
	KindMigrate:       "migrate",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one record: 48 bytes, no pointers, so the ring is one flat
// allocation the garbage collector never scans.
type Event struct {
	Start, End uint64 // device cycles; End == Start for an instant
	Seq        uint64 // the command's sequence number or ring index
	Size       uint64 // the command's size in bytes (cycles, for DELAY)
	Arg        uint64 // kind-specific (a doorbell value, a fault)
	Channel    abi.Channel
	Kind       Kind
	Engine     abi.Engine
	Op         abi.Opcode
	Status     uint8 // an abi.Status, which fits a byte
	_          [2]byte
}

// Buffer is the ring of events.
type Buffer struct {
	events []Event
	next   atomic.Uint64 // events recorded so far; the next goes in slot next % len
}

// DefaultEvents is the capacity of a buffer made with New(0).
const DefaultEvents = 1 << 16

// New returns a buffer for the last capacity events (DefaultEvents if
// capacity <= 0).
func New(capacity int) *Buffer {
	if capacity <= 0 {
		capacity = DefaultEvents
	}
	return &Buffer{events: make([]Event, capacity)}
}

// Record adds ev. Any number of goroutines may record at once: each takes
// its own slot with one atomic add. (A writer that fell a whole ring behind
// another could share its slot; with 65,536 slots that would take a
// goroutine descheduled for the length of tens of thousands of commands,
// and costs one garbled event in a debugging aid, never a crash.)
func (b *Buffer) Record(ev Event) {
	i := b.next.Add(1) - 1
	b.events[i%uint64(len(b.events))] = ev
}

// Events returns the recorded events, oldest first, sorted by Start. Call
// it only when no one is recording any more.
func (b *Buffer) Events() []Event {
	n := b.next.Load()
	var out []Event
	if n <= uint64(len(b.events)) {
		out = slices.Clone(b.events[:n])
	} else {
		at := n % uint64(len(b.events))
		out = append(slices.Clone(b.events[at:]), b.events[:at]...)
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return out
}

// Dropped returns how many events were overwritten before being read.
func (b *Buffer) Dropped() uint64 {
	if n := b.next.Load(); n > uint64(len(b.events)) {
		return n - uint64(len(b.events))
	}
	return 0
}
