package abi

import (
	"encoding/binary"
	"fmt"
)

// The runlist. Many channels share an engine, and the engine schedules
// them: which channels it serves, and how, is a runlist — a table in device
// memory, written by the driver, handed to the engine through its control
// page, in the manner of NVIDIA's runlist submit (NV_RAMRL entries, a
// base and length register, a submit that the engine acknowledges).
//
// Each entry names a channel and how it is served:
//
//	offset  size  field
//	0       2     channel     the channel (0 .. NumChannels-1)
//	2       1     priority    0 (PriorityLow) .. MaxPriority; higher runs first
//	3       1     flags       RunlistPrivileged; other bits reserved, zero
//	4       2     context     the context its commands run in
//	6       2     reserved    zero
//	8       8     timeslice   cycles it may hold the engine while a channel of
//	                          its priority waits; 0: no slice (until its ring is empty)
//	16      8     state       device PA of its state block (ChannelStateSize
//	                          bytes, 64-aligned), where the engine saves a
//	                          preempted command; 0: the channel is never
//	                          preempted inside a command
//	24      8     ctxsave     device PA of its engine-context save area
//	                          (RegContextSize bytes, 64-aligned), where a
//	                          preemption saves the engine's context and a
//	                          resume restores it; checked when used: a bad
//	                          one faults the channel (FaultContextSave)
//
// The submit (driver, then engine):
//
//	driver                                     engine (at a safe point)
//	write the entries into device memory
//	store RegRunlistBase, RegRunlistLen
//	store gen → RegRunlistGen                  load RegRunlistGen: moved?
//	                                             read and check every entry
//	                                             accepted: serve the new list;
//	                                               drain the channels it dropped
//	                                             refused: keep the old one
//	                                             store why → RegRunlistError
//	load RegRunlistAck == gen ◄──────────────── store gen → RegRunlistAck
//	read RegRunlistError; the old table's
//	  memory, and a dropped channel's, are free
//
// The engine copies the entries when it accepts a list, so it never reads
// the table again: the driver may free it after the acknowledgement. A
// channel the new list drops is drained: every command published to it and
// not yet run completes with StatusRemoved (and writes its fence, so no
// waiter is left behind); a preempted command does too. None is lost
// silently, and after the acknowledgement the engine never touches that
// channel's ring, doorbell or state block again.
//
// The device comes out of reset with each engine's runlist holding its
// default channel (DefaultChannel): privileged, PriorityNormal, no slice,
// no state block — the one-channel-per-engine device of the stages before.
const (
	RunlistEntrySize = 32
	MaxRunlist       = 64 // entries per runlist
	ChannelStateSize = 128

	// RunlistPrivileged lets the channel's commands name their context
	// (the descriptor's Ctx, as before this stage): the driver's own
	// channels. A channel without it runs in the entry's context, and a
	// command naming any other fails with StatusBadContext — which is
	// what lets a client own a channel without reaching other contexts.
	RunlistPrivileged = 1 << 0
)

// Priorities.
const (
	PriorityLow    = 0
	PriorityNormal = 1
	PriorityHigh   = 2
	MaxPriority    = 3
)

// RunlistEntry is one entry, decoded.
type RunlistEntry struct {
	Channel   Channel
	Priority  uint8
	Flags     uint8
	Context   Context
	Timeslice uint64
	State     uint64
	CtxSave   uint64
}

// Encode writes e into b (RunlistEntrySize bytes), reserved bytes zero.
func (e RunlistEntry) Encode(b []byte) {
	b = b[:RunlistEntrySize]
	clear(b)
	binary.LittleEndian.PutUint16(b[0:], uint16(e.Channel))
	b[2] = e.Priority
	b[3] = e.Flags
	binary.LittleEndian.PutUint16(b[4:], uint16(e.Context))
	binary.LittleEndian.PutUint64(b[8:], e.Timeslice)
	binary.LittleEndian.PutUint64(b[16:], e.State)
	binary.LittleEndian.PutUint64(b[24:], e.CtxSave)
}

// DecodeRunlistEntry reads an entry from b, reporting reserved bytes or
// flags that are not zero as ok = false.
func DecodeRunlistEntry(b []byte) (e RunlistEntry, ok bool) {
	b = b[:RunlistEntrySize]
	e = RunlistEntry{
		Channel:   Channel(binary.LittleEndian.Uint16(b[0:])),
		Priority:  b[2],
		Flags:     b[3],
		Context:   Context(binary.LittleEndian.Uint16(b[4:])),
		Timeslice: binary.LittleEndian.Uint64(b[8:]),
		State:     binary.LittleEndian.Uint64(b[16:]),
		CtxSave:   binary.LittleEndian.Uint64(b[24:]),
	}
	ok = binary.LittleEndian.Uint16(b[6:]) == 0 && e.Flags&^RunlistPrivileged == 0
	return e, ok
}

// ANCHOR: runlistregs

// The runlist registers. In each engine's privileged control page:
const (
	RegRunlistBase = 0x040 // device PA of the table, RunlistEntrySize-aligned
	RegRunlistLen  = 0x048 // entries, 1 .. MaxRunlist
	RegRunlistGen  = 0x080 // stored last: the submit's generation; its own line

	// RegWatchdog is the watchdog's limit in cycles: a command that has
	// run longer than this (its time on the engine, not its time
	// preempted) is stopped with StatusTimeout, its channel faulted
	// (FaultTimeout) and its context marked faulted (FaultHung), as
	// drm_sched's job timeout does. 0: no watchdog (the reset value).
	// Passing the limit is a preemption request with a deadline, the
	// limit again: a command that reaches a preemption point stops there;
	// one that has not by the deadline (a hung shader: OpSpin) is stopped
	// by resetting the engine (device/watchdog.go), counted in RegResets.
	RegWatchdog = 0x0c0

	// RegPreemptTimeout is how long, in cycles, a command the engine has
	// asked to give it up may take to reach a preemption point: the
	// engine asks when another channel should run (a higher priority, a
	// spent timeslice, a channel that has waited past every priority) or
	// the driver has submitted a runlist, and a command with no
	// preemption point (OpSpin) that is still running that long after is
	// stopped by resetting the engine, as the watchdog's reset stops it
	// (device/preempttimeout.go), whatever RegWatchdog says. This is
	// i915's forced preemption (preempt_timeout_ms, 640 ms by default
	// there). 0: none (the reset value).
	RegPreemptTimeout = 0x0c8
)

// In each engine's read-only status page:
const (
	RegRunlistAck   = 0x140 // the last generation the engine has handled
	RegRunlistError = 0x148 // RunlistOK, or why it refused that one (RunlistError)
	RegPreempts     = 0x180 // commands preempted half-way, since reset
	RegSwitches     = 0x188 // channel switches, since reset
	RegTimeouts     = 0x190 // commands the watchdog or a preempt timeout stopped, since reset
	RegResets       = 0x198 // engine resets: commands stopped that never reached a preemption point
)

// ANCHOR_END: runlistregs

// RunlistError is why an engine refused a runlist: a kind in the low byte,
// the index of the offending entry above it.
type RunlistError uint64

const (
	RunlistOK        RunlistError = 0
	RunlistBadTable  RunlistError = 1 // base misaligned or outside device memory, or length 0 or above MaxRunlist
	RunlistBadEntry  RunlistError = 2 // reserved bits set, no such channel, priority or context, or a bad state block
	RunlistDuplicate RunlistError = 3 // the channel is in the table twice
	RunlistBusy      RunlistError = 4 // the channel is on another engine's runlist
)

// Kind returns the error without its entry index.
func (r RunlistError) Kind() RunlistError { return r & 0xff }

// Entry returns the index of the entry the error names.
func (r RunlistError) Entry() int { return int(r >> 8) }

func (r RunlistError) String() string {
	kind := map[RunlistError]string{RunlistOK: "ok", RunlistBadTable: "bad table", RunlistBadEntry: "bad entry",
		RunlistDuplicate: "channel listed twice", RunlistBusy: "channel on another engine's runlist"}[r.Kind()]
	if kind == "" {
		kind = fmt.Sprintf("runlist error(%d)", uint64(r.Kind()))
	}
	if r.Kind() == RunlistOK || r.Kind() == RunlistBadTable {
		return kind
	}
	return fmt.Sprintf("%s (entry %d)", kind, r.Entry())
}

// Error makes a refusal usable as an error.
func (r RunlistError) Error() string { return "softgpu: runlist refused: " + r.String() }

// ANCHOR: state

// A channel's state block, in device memory at its runlist entry's State,
// written by the engine when it preempts a command of the channel and read
// back when it resumes it. The driver zeroes it before the channel's first
// runlist, and reads it only after the channel has left every runlist.
const (
	StateFlags = 0x00 // StateSaved while a preempted command is held here
	StateSeq   = 0x08 // the ring index of that command
	StateDone  = 0x10 // its cursor: bytes of each operand done (cycles, for DELAY)
	StateSum   = 0x18 // SUM32's running total
	StateRan   = 0x20 // cycles it has run so far (the watchdog's count)
	StateDesc  = 0x40 // its descriptor, CommandSize bytes, as fetched

	StateSaved = 1
)

// ANCHOR_END: state

// FaultTimeout, as a ChannelFault: the watchdog stopped a command of the
// channel, or the engine was reset under it at a preempt timeout
// (RegPreemptTimeout); RegChannelFaultValue holds the cycles it had run.
// FaultState: a preempted command's saved state did not read back as the
// engine wrote it (it names a different index, or a cursor past the
// command's end); RegChannelFaultValue holds the index the engine
// expected.
//
// FaultContextSave: the channel's engine-context save area could not be
// used — its runlist entry's CtxSave is 0, misaligned or outside device
// memory (RegChannelFaultValue holds it), or the context read back on a
// resume is not the one the engine saved there (it holds the channel and
// index the engine expected, channel<<48 | index&(1<<48-1)).
const (
	FaultTimeout     ChannelFault = 2
	FaultState       ChannelFault = 3
	FaultContextSave ChannelFault = 4
)
