package device

import (
	"encoding/binary"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/trace"
)

// This file is the engine's scheduler: many channels share an engine, and
// the engine decides which one it serves. The driver says which channels,
// and how, in a runlist (the format and the submit handshake are in
// abi/runlist.go); the engine copies it in at a safe point, between
// commands, and from then on decides alone:
//
//   - Serve the current channel while it has work, unless a channel of
//     higher priority has work (it preempts at once), or the current one's
//     timeslice has run out while a channel of its own priority waits.
//   - Otherwise switch to the channel with work of highest priority; among
//     equals, the next after the current one in runlist order (round robin).
//   - A channel that has waited starveLimit with work is treated as above
//     every priority until it runs: a low-priority channel always makes
//     progress, one command or one chunk at a time, however busy the
//     higher ones are.
//   - The bypass: with one channel on the runlist the engine does none of
//     this — no clock reads, no scans, no chunks — and serves it as the
//     one-channel engine of the stages before did.
//
// Preemption happens at chunk boundaries. With more than one channel on
// the runlist, a command of a channel that has a state block moves its
// operands in runs of at most chunk bytes (a DELAY polls), and after each
// the engine asks whether it should give the engine up (boundary). If so,
// it saves the command — its descriptor as fetched, its cursor, SUM32's
// running total, the cycles it has run — in the channel's state block in
// device memory (preempt), and serves another channel; when the channel
// is chosen again, the command is read back, checked, and resumed from the
// cursor (resume). The runs before the cursor are not repeated, so the
// result is the same bytes as an unpreempted run's.
//
// The watchdog checks the same boundaries: a command whose time on the
// engine passes RegWatchdog stops with StatusTimeout; its channel is
// faulted and its context marked faulted, and every other channel goes on.

// chunk is the most a run moves when the command may be preempted: one
// memmove of 64 KiB (3.3 µs at 20 GB/s), which bounds how long a channel that
// should take over waits for a long copy to reach a boundary. It costs the
// preemptible copy a boundary check per 64 KiB, and memmoves of 64 KiB
// rather than up to maxRun (mmu.go: below 1 MiB Go's memmove stays in the
// cache); the bypass keeps maxRun.
const chunk = 64 << 10

// starveLimit is how long a channel with work may wait before it runs
// regardless of priority: 1 ms.
const starveLimit = 1_000_000

// preempted is execute's result for a command stopped at a boundary to let
// another channel run; it is never a command's status (complete never
// sees it), so it lies outside abi.Status's values.
const preempted abi.Status = 1 << 31

// sched is an engine's scheduling state, private to the engine goroutine.
type sched struct {
	list       []*chanState // the runlist as accepted, in table order
	at         int          // the index in list of the channel being served
	rlSeen     uint64       // the last RegRunlistGen handled
	chunked    bool         // more than one channel on the runlist: preemptible commands stop at chunks
	sliceStart uint64       // when the channel being served got the engine (only kept when it has a slice)
	runStart   uint64       // when the current command's current slice began (kept when timed)
	timed      bool         // the current command's time is being counted (watchdog or preemptible)
	watchdog   uint64       // RegWatchdog as read when the current command started
	// preemptTimeout is RegPreemptTimeout as read when the current
	// command started, if it may be preempted; else 0 (preempttimeout.go).
	preemptTimeout uint64

	// forcePreempt, set by tests before they submit a runlist, is asked
	// at each boundary of a preemptible command as well: true preempts
	// there, so a test can stop a command at every boundary, or at random
	// ones, whatever the other channels do.
	forcePreempt func(j *job) bool
}

// resetRunlist gives the engine the runlist it has at reset: its default
// channel alone, privileged, normal priority, no slice, no state block.
func (e *Engine) resetRunlist() {
	c := &e.dev.chans[abi.DefaultChannel(e.id)]
	e.dev.owner[c.id].Store(uint32(e.id) + 1)
	c.prio, c.privileged, c.ctx, c.slice, c.state, c.ctxSave = abi.PriorityNormal, true, 0, 0, 0, 0
	e.list, e.at, e.cur = []*chanState{c}, 0, c
}

// ANCHOR: runlist

// checkRunlist handles a runlist submit, if the driver has made one since
// the engine last looked: it reads and checks the table, installs it or
// refuses it, and acknowledges. pollLoop calls it between commands.
func (e *Engine) checkRunlist() {
	gen := e.regs.Load(e.controlPage + abi.RegRunlistGen) // pairs with the driver's store in submitRunlist
	if gen == e.rlSeen {
		return
	}
	e.rlSeen = gen
	entries, rerr := e.readRunlist()
	if rerr == abi.RunlistOK {
		e.install(entries)
	}
	e.regs.Store(e.statusPage+abi.RegRunlistError, uint64(rerr))
	// This store tells the driver the engine is done with the old table,
	// and with every channel the new one dropped; its load of
	// RegRunlistAck pairs with it.
	e.regs.Store(e.statusPage+abi.RegRunlistAck, gen)
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindRunlist, Start: e.dev.clock.Now(), Engine: e.id, Arg: gen,
			Status: uint8(rerr.Kind())})
	}
}

// ANCHOR_END: runlist

// readRunlist reads and checks the table the control page names, and
// claims for this engine every channel in it that it did not have. Every
// byte is input: the table must lie in device memory, each entry must name
// a channel, priority and context the device has, with reserved bits clear
// and a state block inside device memory, each channel once, and none that
// another engine serves — a channel on two runlists would have its commands
// run twice. On any error nothing is claimed and the old runlist stays.
func (e *Engine) readRunlist() ([]abi.RunlistEntry, abi.RunlistError) {
	mem := e.dev.mem
	base, n := e.regs.Load(e.controlPage+abi.RegRunlistBase), e.regs.Load(e.controlPage+abi.RegRunlistLen)
	if n == 0 || n > abi.MaxRunlist || base%abi.RunlistEntrySize != 0 || base > uint64(len(mem)) ||
		n*abi.RunlistEntrySize > uint64(len(mem))-base {
		return nil, abi.RunlistBadTable
	}
	entries := make([]abi.RunlistEntry, n)
	var seen [abi.NumChannels]bool
	for i := range entries {
		at := base + uint64(i)*abi.RunlistEntrySize
		ent, ok := abi.DecodeRunlistEntry(mem[at : at+abi.RunlistEntrySize])
		bad := abi.RunlistError(i) << 8
		switch {
		case !ok || !ent.Channel.Valid() || ent.Priority > abi.MaxPriority || ent.Context >= abi.MaxContexts:
			return nil, abi.RunlistBadEntry | bad
		case ent.State != 0 && (ent.State%64 != 0 || ent.State > uint64(len(mem)) || abi.ChannelStateSize > uint64(len(mem))-ent.State):
			return nil, abi.RunlistBadEntry | bad
		case seen[ent.Channel]:
			return nil, abi.RunlistDuplicate | bad
		}
		seen[ent.Channel] = true
		if c := &e.dev.chans[ent.Channel]; c.saved && ent.State != c.state {
			return nil, abi.RunlistBadEntry | bad // its preempted command is in the old state block
		}
		entries[i] = ent
	}
	mine := uint32(e.id) + 1
	for i, ent := range entries {
		owner := &e.dev.owner[ent.Channel]
		if owner.Load() == mine || owner.CompareAndSwap(0, mine) {
			continue
		}
		for _, undo := range entries[:i] { // give back what this call claimed
			if !e.listed(undo.Channel) {
				e.dev.owner[undo.Channel].Store(0)
			}
		}
		return nil, abi.RunlistBusy | abi.RunlistError(i)<<8
	}
	return entries, abi.RunlistOK
}

// listed reports whether channel c is on the engine's current runlist.
func (e *Engine) listed(c abi.Channel) bool {
	for _, l := range e.list {
		if l.id == c {
			return true
		}
	}
	return false
}

// install makes entries the runlist: the channels it keeps carry on where
// they were, new ones start from their indices, and every channel it drops
// is drained and given up.
func (e *Engine) install(entries []abi.RunlistEntry) {
	keep := make(map[abi.Channel]bool, len(entries))
	list := make([]*chanState, len(entries))
	for i, ent := range entries {
		c := &e.dev.chans[ent.Channel]
		c.prio, c.privileged, c.ctx = ent.Priority, ent.Flags&abi.RunlistPrivileged != 0, ent.Context
		c.slice, c.state, c.ctxSave = ent.Timeslice, ent.State, ent.CtxSave
		list[i] = c
		keep[c.id] = true
	}
	for _, c := range e.list {
		if !keep[c.id] {
			e.drain(c)
			e.reset(c)
			c.waitSince = 0
			e.dev.owner[c.id].Store(0) // after the drain's last write to the channel
		}
	}
	cur := e.cur
	e.list, e.at, e.chunked = list, 0, len(list) > 1
	for i, c := range list {
		if c == cur {
			e.at = i
		}
	}
	e.cur = list[e.at]
	e.sliceStart = e.dev.clock.Now()
}

// drain completes, with StatusRemoved, every command of c that was
// published and has not run — a preempted one first — writing their fences,
// so that no command is lost silently when c leaves the runlist. A faulted
// channel is left as it is: its fault already says that the rest never ran.
func (e *Engine) drain(c *chanState) {
	served := e.cur
	e.cur = c
	defer func() { e.cur = served }()
	if c.faulted {
		return
	}
	c.stalled = false // a command stalled on a fault is removed like a preempted one
	if e.resume() {
		e.complete(abi.StatusRemoved)
		e.signal()
	}
	if c.faulted {
		return
	}
	if tail := e.regs.Load(c.doorbell + abi.RegDoorbell); tail != c.tail && !e.accept(tail) {
		return
	}
	for c.head != c.tail {
		e.take()
		e.complete(abi.StatusRemoved)
		e.signal()
	}
}

// reset makes a channel that is leaving its runlist fit for its next
// owner, as a real device resets a channel the driver has torn down. A
// channel that left cleanly needs nothing: the drain completed every
// command below its doorbell. A faulted one keeps its fault while it is
// listed — that is how the driver learns of it — but must not pass it on:
// the engine clears the fault, puts the doorbell back at the head (the
// value that faulted it, or any command it stranded, is forgotten), and
// rewrites the completion ring's next lap, so that every index below the
// head reads as completed and none at or above it, as after resetRing.
// Then the driver that opens the id next starts where this one stopped.
func (e *Engine) reset(c *chanState) {
	if !c.faulted {
		return
	}
	size := uint64(len(c.ring)) / abi.CommandSize
	mask := size - 1
	for i := c.head; i != c.head+size; i++ {
		c.completions[abi.CompletionWord(i, mask)].Store(i - size)
	}
	c.tail, c.saved, c.stalled, c.faulted = c.head, false, false, false
	e.regs.Store(c.doorbell+abi.RegDoorbell, c.head)
	e.regs.Store(c.status+abi.RegChannelFault, uint64(abi.FaultNone))
	e.regs.Store(c.status+abi.RegChannelFaultValue, 0)
}

// ANCHOR: next

// next chooses the command to run: it makes e.cur the channel to serve and
// e.job its next command, and reports whether there is one.
func (e *Engine) next() bool {
	if len(e.list) == 1 {
		if e.cur.stalled {
			return false // its next command waits behind the stalled one
		}
		return e.resume() || e.fetch() // the bypass
	}
	now := e.dev.clock.Now()
	if !e.hasWork(e.cur) || e.switchDue(now) {
		c, i := e.choose(now)
		if c == nil {
			return false
		}
		e.switchTo(c, i, now)
	}
	return e.resume() || e.fetch()
}

// ANCHOR_END: next

// hasWork reports whether channel c has a command to run: a preempted one,
// one fetched past, or a doorbell that moved. The doorbell load is of a
// line that stays in the engine's cache until the driver writes it, so a
// scan of quiet channels costs a few nanoseconds each.
func (e *Engine) hasWork(c *chanState) bool {
	return !c.faulted && !c.stalled && (c.saved || c.head != c.tail || e.regs.Load(c.doorbell+abi.RegDoorbell) != c.tail)
}

// effective is the priority c competes with at now: its own, or above
// every priority once it has waited starveLimit with work.
func effective(c *chanState, now uint64) int {
	if c.waitSince != 0 && now-c.waitSince >= starveLimit {
		return abi.MaxPriority + 1
	}
	return int(c.prio)
}

// ANCHOR: switchdue

// switchDue reports whether the channel being served should give the
// engine up: another channel with work has a higher (effective) priority,
// or one of the same priority waits and the current one's slice is spent.
// It notes when each channel with work began waiting.
func (e *Engine) switchDue(now uint64) bool {
	cur := e.cur
	spent := cur.slice != 0 && now-e.sliceStart >= cur.slice
	due := false
	for _, c := range e.list {
		if c == cur {
			continue
		}
		if !e.hasWork(c) {
			c.waitSince = 0
			continue
		}
		if c.waitSince == 0 {
			c.waitSince = now
		}
		p := effective(c, now)
		due = due || p > int(cur.prio) || (spent && p == int(cur.prio))
	}
	return due
}

// ANCHOR_END: switchdue

// choose returns the channel with work of highest effective priority,
// the first after the current one in runlist order among equals, and its
// index; nil if no channel has work.
func (e *Engine) choose(now uint64) (*chanState, int) {
	var best *chanState
	bestAt, bestPrio := 0, -1
	for k := 1; k <= len(e.list); k++ {
		i := (e.at + k) % len(e.list) // the current channel comes last
		c := e.list[i]
		if !e.hasWork(c) {
			continue
		}
		if c.waitSince == 0 && c != e.cur {
			c.waitSince = now
		}
		if p := effective(c, now); p > bestPrio {
			best, bestAt, bestPrio = c, i, p
		}
	}
	return best, bestAt
}

// switchTo makes c, at index i of the runlist, the channel being served.
func (e *Engine) switchTo(c *chanState, i int, now uint64) {
	from := e.cur
	e.cur, e.at, e.sliceStart = c, i, now
	c.waitSince = 0
	if c == from {
		return
	}
	if e.hasWork(from) {
		from.waitSince = now
	}
	e.regs.Store(e.statusPage+abi.RegSwitches, e.regs.Load(e.statusPage+abi.RegSwitches)+1) // the engine is its only writer
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindSwitch, Start: now, Engine: e.id, Channel: c.id, Arg: uint64(from.id)})
	}
}

// startCommand begins timing the command about to run, when the watchdog
// is on or the command may be preempted; otherwise it reads no clock.
func (e *Engine) startCommand() {
	e.watchdog = e.regs.Load(e.controlPage + abi.RegWatchdog)
	e.preemptTimeout = 0
	if e.preemptible() {
		e.preemptTimeout = e.regs.Load(e.controlPage + abi.RegPreemptTimeout)
	}
	e.timed = e.watchdog != 0 || e.preemptible()
	if e.timed {
		e.runStart = e.dev.clock.Now()
	}
	if e.watched() {
		e.watchStart(e.runStart, e.job.ran) // watchdog.go: the unit watches this command
	}
}

// endCommand tells the watchdog unit the command has stopped running.
func (e *Engine) endCommand() {
	if e.watched() {
		e.watchEnd()
	}
}

// watched reports whether the watchdog unit watches the current command:
// it runs under a watchdog, or it may be asked to give way under a
// preempt timeout.
func (e *Engine) watched() bool { return e.watchdog != 0 || e.preemptTimeout != 0 }

// preemptible reports whether the command being run may stop at a chunk
// boundary to let another channel run.
func (e *Engine) preemptible() bool { return e.chunked && e.cur.state != 0 }

// runCap is the most a run may move: a chunk when the command may be
// preempted, else maxRun.
func (e *Engine) runCap() uint64 {
	if e.preemptible() {
		return chunk
	}
	return maxRun
}

// ANCHOR: boundary

// boundary is called at each chunk boundary of a command (after each run
// that did not finish it, and every so often in a DELAY). It returns
// StatusTimeout if the watchdog's limit has passed, preempted if another
// channel should have the engine, and StatusOK to go on.
func (e *Engine) boundary(j *job) abi.Status {
	if !e.timed {
		return abi.StatusOK
	}
	now := e.dev.clock.Now()
	if e.watchdog != 0 && (j.ran+now-e.runStart >= e.watchdog || e.preemptRequested()) {
		return abi.StatusTimeout
	}
	if e.switchWanted(now) || e.preemptible() && e.forcePreempt != nil && e.forcePreempt(j) {
		return preempted
	}
	return abi.StatusOK
}

// switchWanted reports whether the engine should take the command being
// run off it: the command may be preempted, and the driver has submitted
// a runlist or another channel should run (switchDue). A command at a
// boundary answers at once; one with no boundary is asked, and given a
// deadline (askToYield, preempttimeout.go).
func (e *Engine) switchWanted(now uint64) bool {
	return e.preemptible() && (e.runlistPending() || e.switchDue(now))
}

// runlistPending reports whether the driver has submitted a runlist the
// engine has not taken yet. A preemptible command gives way to it at its
// next boundary, as to a channel of higher priority: the engine saves the
// command, takes the new list between commands (checkRunlist), and
// resumes the command later if its channel is still listed — or, if the
// list dropped it, completes it with StatusRemoved (drain). Otherwise one
// long command would hold up every channel opened or closed on its engine
// for as long as it ran.
func (e *Engine) runlistPending() bool {
	return e.regs.Load(e.controlPage+abi.RegRunlistGen) != e.rlSeen // pairs with the driver's store in submitRunlist
}

// ANCHOR_END: boundary

// ANCHOR: preempt

// preempt saves the command execute stopped at a boundary in its channel's
// state block — descriptor, cursor, running total, cycles run — and marks
// the block saved, last. The channel keeps the engine's attention (it has
// work: saved) and resumes when next chosen.
func (e *Engine) preempt() {
	c, j := e.cur, &e.job
	now := e.dev.clock.Now()
	if !e.saveContext(c, j.seq) { // engctx.go: the switch's price
		return // the channel is faulted: its save area is bad
	}
	e.save(abi.StateSaved, now)
	e.regs.Store(e.statusPage+abi.RegPreempts, e.regs.Load(e.statusPage+abi.RegPreempts)+1) // the engine is its only writer
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindPreempt, Start: j.start, End: now, Engine: e.id, Channel: c.id,
			Op: j.cmd.Op, Seq: j.seq, Arg: j.done})
	}
}

// save writes the command being run into its channel's state block, with
// flags, which it stores last, and marks the channel as holding one.
func (e *Engine) save(flags uint64, now uint64) {
	c, j := e.cur, &e.job
	j.ran += now - e.runStart
	st := e.dev.mem[c.state : c.state+abi.ChannelStateSize]
	j.cmd.Encode(st[abi.StateDesc:])
	binary.LittleEndian.PutUint64(st[abi.StateSeq:], j.seq)
	binary.LittleEndian.PutUint64(st[abi.StateDone:], j.done)
	binary.LittleEndian.PutUint64(st[abi.StateSum:], j.sum)
	binary.LittleEndian.PutUint64(st[abi.StateRan:], j.ran)
	binary.LittleEndian.PutUint64(st[abi.StateFlags:], flags)
	c.saved = true
}

// resume reads back the command preempt saved for the channel being
// served, if there is one, into e.job, and reports whether it did. The
// block is device memory, so what comes back is checked like any input: it
// must be marked saved, name the index the engine fetched last on the
// channel, and hold a cursor inside the command. Anything else faults the
// channel (FaultState) rather than run a command the channel never sent.
func (e *Engine) resume() bool {
	c := e.cur
	if !c.saved || c.faulted || c.stalled {
		return false
	}
	c.saved = false
	st := e.dev.mem[c.state : c.state+abi.ChannelStateSize]
	flags := binary.LittleEndian.Uint64(st[abi.StateFlags:])
	binary.LittleEndian.PutUint64(st[abi.StateFlags:], 0)
	j := &e.job
	j.load(st[abi.StateDesc:abi.StateDesc+abi.CommandSize], binary.LittleEndian.Uint64(st[abi.StateSeq:]))
	j.done = binary.LittleEndian.Uint64(st[abi.StateDone:])
	j.sum = binary.LittleEndian.Uint64(st[abi.StateSum:])
	j.ran = binary.LittleEndian.Uint64(st[abi.StateRan:])
	end := j.cmd.Size
	if j.cmd.Op == abi.OpDelay || j.cmd.Op == abi.OpSpin {
		end = j.cmd.Value
	}
	if (flags != abi.StateSaved && flags != abi.StateSaved|abi.StateFaulted) || j.seq != c.head-1 || j.done > end {
		e.fault(abi.FaultState, c.head-1)
		return false
	}
	// A preemption saved the engine's context; a replayable fault's stall
	// (fault.go) did not: the faulting command keeps it, as an SM keeps a
	// faulting warp's registers, so only a preempted command restores. That
	// is the model's shortcut: the engine serves other channels while one
	// is stalled, and their preemptions and resumes overwrite the one live
	// context. Nothing reads a context but its stamp, so no result changes;
	// a real engine switching away from a faulted context would save it,
	// and that save is not charged (the stage 8 chapter says so).
	if flags == abi.StateSaved && !e.restoreContext(c, j.seq) { // engctx.go: read back before the command goes on
		return false
	}
	if e.trace != nil {
		j.start = e.dev.clock.Now()
	}
	return true
}

// ANCHOR_END: preempt

// hang is what the watchdog does after the command it stopped has
// completed with StatusTimeout: it faults the channel, so nothing more of
// it runs, and marks its context faulted (FaultHung), so a sticky context
// stops on every channel, as after an MMU fault. reset says the command
// never reached a preemption point and the engine is being reset under
// it (watchdog.go): that is counted in the context's RegCtxResets, which
// stage 9's daemon judges its client by.
func (e *Engine) hang(reset bool) {
	ran := e.job.ran + e.dev.clock.Now() - e.runStart
	// The context's fault first, the channel's last: the driver learns of
	// the hang from the channel's fault (it completes what is queued
	// behind as faulted), so whoever has seen that must find the context
	// faulted too. The other order let a waiter return before FaultHung
	// was there (seen under -race in TestWatchdogStopsOnlyTheHungChannel).
	s := abi.ContextStatusRegs(e.mmu.ctx)
	if reset {
		e.regs.Add(s+abi.RegCtxResets, 1) // both engines may reset under one context at once: an atomic add, as RegCtxFaults
	}
	e.regs.Store(s+abi.RegCtxFaultVA, 0)
	e.regs.Store(s+abi.RegCtxFaultInfo, uint64(abi.FaultHung))
	e.regs.Add(s+abi.RegCtxFaults, 1)
	e.regs.Store(e.statusPage+abi.RegTimeouts, e.regs.Load(e.statusPage+abi.RegTimeouts)+1) // the engine is its only writer
	e.fault(abi.FaultTimeout, ran)
}

// anyWork reports whether any channel on the runlist has work, or the
// driver has submitted a runlist the engine has not handled.
func (e *Engine) anyWork() bool {
	if e.regs.Load(e.controlPage+abi.RegRunlistGen) != e.rlSeen {
		return true
	}
	if e.regs.Load(abi.RegFaultReplay) != e.replaySeen { // pairs with the driver's store in replay
		return true
	}
	for _, c := range e.list {
		if e.hasWork(c) {
			return true
		}
	}
	return false
}
