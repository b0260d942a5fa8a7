package driver

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/internal/spin"
)

// Channels and runlists, the driver's half (the engine's is in
// device/sched.go; the format and the handshake in abi/runlist.go).
//
// Each engine serves the channels on its runlist. The driver keeps the
// list of each engine as a slice of entries; to change it — a channel
// opened or closed — it writes the whole new table into device memory,
// submits it, wakes the engine, and waits for the acknowledgement. Only
// then may it write the table again (the engine copies a table when it
// takes it, and never reads it again) and, for a channel that left, reuse
// its state block and its id: after the acknowledgement the engine has
// drained the channel — every command published to it and not yet run has
// completed with abi.StatusRemoved — and touches it no more.
//
// The engines' default channels are on their runlists from the start and
// are privileged: their commands name their context, so the driver's own
// work, and the GPU API of the stages before, can run in any context. A
// channel opened with NewChannel belongs to one context; the driver stamps
// that context on every command it writes to it, and the engine refuses
// any other (abi.StatusBadContext), so a channel cannot be used to reach
// another address space even by a driver that forgot.

// ErrRunlist reports a runlist the device refused (wrapping the
// abi.RunlistError), or a channel option out of range.
var ErrRunlist = errors.New("softgpu: runlist")

// ChannelOptions says how the engine serves a channel.
type ChannelOptions struct {
	// Priority is abi.PriorityLow .. abi.MaxPriority; a channel of higher
	// priority with work preempts one of lower priority at its next chunk
	// boundary. The zero value is abi.PriorityLow; NewChannel callers
	// usually want abi.PriorityNormal.
	Priority uint8
	// Timeslice is how long, in cycles (ns), the channel may hold the
	// engine while another channel of its priority has work; zero means
	// no slice: it keeps the engine until its ring is empty.
	Timeslice uint64
}

// The scheduler's area of device memory, above data memory, which no
// context maps, so no command can write a runlist or a state block: a
// runlist table per engine, then a state block per channel.
const (
	runlistTableSize = abi.MaxRunlist * abi.RunlistEntrySize
	schedArea        = abi.NumEngines*runlistTableSize + abi.NumChannels*abi.ChannelStateSize
)

// runlists is the driver's copy of every engine's runlist.
type runlists struct {
	// mu serialises changes: one submit per engine at a time, and the
	// channel ids with them. It is held while waiting for an
	// acknowledgement (one command long at most), never with another lock.
	mu      sync.Mutex
	area    uint64 // device PA of the scheduler's area
	entries [abi.NumEngines][]abi.RunlistEntry
}

// table returns the PA of engine e's runlist table. One is enough: the
// engine reads a table only between the driver's store of RegRunlistGen
// and its acknowledgement, and the driver writes it only outside that
// window, under mu.
func (rl *runlists) table(e abi.Engine) uint64 { return rl.area + uint64(e)*runlistTableSize }

// stateBlock returns the PA of channel c's state block.
func (rl *runlists) stateBlock(c abi.Channel) uint64 {
	return rl.area + abi.NumEngines*runlistTableSize + uint64(c)*abi.ChannelStateSize
}

// entryFor returns ch's runlist entry.
func entryFor(ch *Channel) abi.RunlistEntry {
	ent := abi.RunlistEntry{Channel: ch.id, Priority: ch.prio, Timeslice: ch.slice, State: ch.state, CtxSave: ch.ctxSave}
	if ch.privileged {
		ent.Flags = abi.RunlistPrivileged
	} else {
		ent.Context = ch.ctx.id
	}
	return ent
}

// ANCHOR: submit

// submitRunlist hands engine e the runlist in d.runlists.entries[e] — for
// an engine that has none yet, its default channel alone — and waits until
// the engine has taken it or refused it. The caller holds d.runlists.mu.
func (d *Driver) submitRunlist(e abi.Engine) error {
	rl := &d.runlists
	if rl.entries[e] == nil {
		def := d.channels[abi.DefaultChannel(e)].Load()
		rl.entries[e] = []abi.RunlistEntry{entryFor(def)}
	}
	entries, table := rl.entries[e], rl.table(e)
	mem := d.hw.Memory()
	for i, ent := range entries {
		ent.Encode(mem[table+uint64(i)*abi.RunlistEntrySize:])
	}
	control, status := abi.EngineControlPage(e), abi.EngineStatusPage(e)
	d.regs.Store(control+abi.RegRunlistBase, table)
	d.regs.Store(control+abi.RegRunlistLen, uint64(len(entries)))
	// The generation is stored last: an engine that loads it sees the base,
	// the length and the table (plain stores before an atomic one). Then
	// wake the engine, which may be asleep; it takes the list at its next
	// safe point, between commands.
	gen := d.regs.Load(status+abi.RegRunlistAck) + 1
	d.regs.Store(control+abi.RegRunlistGen, gen)
	d.hw.WakeEngine(e)
	yield := spin.NewCadence(d.yieldEvery)
	for polls := 1; d.regs.Load(status+abi.RegRunlistAck) != gen; polls++ { // pairs with the engine's store in checkRunlist
		if d.stopped() {
			return ErrClosed
		}
		if yield.Due(polls) {
			runtime.Gosched()
		}
	}
	if rerr := abi.RunlistError(d.regs.Load(status + abi.RegRunlistError)); rerr != abi.RunlistOK {
		return fmt.Errorf("%w: %v: %w", ErrRunlist, e, rerr)
	}
	return nil
}

// ANCHOR_END: submit

// ANCHOR: newchannel

// NewChannel opens a channel on engine e for context c, served as opts
// says: a channel id of its own, a state block in device memory for the
// commands the engine preempts, and an entry on the engine's runlist. It
// returns once the engine has taken the new runlist.
func (d *Driver) NewChannel(e abi.Engine, c *Context, opts ChannelOptions) (*Channel, error) {
	switch {
	case e >= abi.NumEngines:
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	case c == nil:
		return nil, fmt.Errorf("%w: a channel needs a context", ErrContext)
	case opts.Priority > abi.MaxPriority:
		return nil, fmt.Errorf("%w: priority %d is above the maximum, %d", ErrRunlist, opts.Priority, abi.MaxPriority)
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	rl := &d.runlists
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.entries[e]) >= abi.MaxRunlist {
		return nil, fmt.Errorf("%w: %v already serves %d channels", ErrRunlist, e, abi.MaxRunlist)
	}
	id := abi.Channel(abi.NumEngines) // the ones below are the engines' default channels
	for id < abi.NumChannels && d.channels[id].Load() != nil {
		id++
	}
	if id == abi.NumChannels {
		return nil, fmt.Errorf("%w: all %d channels are open", ErrNoChannel, abi.NumChannels)
	}
	state := rl.stateBlock(id)
	clear(d.hw.Memory()[state : state+abi.ChannelStateSize]) // on no runlist: no engine reads it
	ch, err := d.newChannel(id, e)
	if err != nil {
		return nil, err
	}
	ctxSave, err := d.allocContextSave() // ctxsave.go
	if err != nil {
		return nil, err
	}
	ch.ctx, ch.prio, ch.slice, ch.state, ch.ctxSave = c, opts.Priority, opts.Timeslice, state, ctxSave
	if d.wake == WakeEvery {
		d.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqEvery)
	}
	if !c.addChannel(ch) { // closed meanwhile
		d.freeContextSave(ctxSave)
		return nil, ErrClosed
	}
	d.channels[id].Store(ch)
	rl.entries[e] = append(slices.Clip(rl.entries[e]), entryFor(ch))
	if err := d.submitRunlist(e); err != nil {
		ch.gone.Store(true) // a Close from the context's Close, waiting for mu, does nothing
		rl.entries[e] = rl.entries[e][:len(rl.entries[e])-1]
		d.channels[id].Store(nil)
		c.removeChannel(ch)
		d.freeContextSave(ctxSave) // refused, or the device stopped: no engine will touch it
		return nil, err
	}
	return ch, nil
}

// ANCHOR_END: newchannel

// ANCHOR: closechannel

// Close takes the channel off its engine's runlist. A command submitted
// before Close and not yet run completes with abi.StatusRemoved (its
// waiter gets that error); a submission after it fails with ErrClosed. It
// returns once the engine has let the channel go; the channel's id and
// state block are then free for another. The engines' default channels
// cannot be closed.
func (ch *Channel) Close() error {
	d := ch.d
	if ch.id < abi.NumEngines {
		return fmt.Errorf("%w: %v is an engine's default channel", ErrNoChannel, ch.id)
	}
	if ch.gone.Swap(true) {
		return nil
	}
	rl := &d.runlists
	rl.mu.Lock()
	defer rl.mu.Unlock()
	e := ch.engine
	rl.entries[e] = slices.DeleteFunc(slices.Clone(rl.entries[e]), func(ent abi.RunlistEntry) bool { return ent.Channel == ch.id })
	err := d.submitRunlist(e)
	// Off the runlist (or the device stopped): nothing more of the channel
	// will complete. Waiters for commands the drain did not reach — a
	// submitter that passed its check before gone was set and rang the
	// doorbell after the drain — settle now, on ErrClosed.
	ch.removed.Store(true)
	ch.timeline.wakeAll()
	if err != nil && !errors.Is(err, ErrClosed) {
		return err // refused: the device keeps the old list, and the channel on it
	}
	ch.released.Store(true)       // after the acknowledgement: retired (pinned.go) passes it every mark from here
	d.freeContextSave(ch.ctxSave) // acknowledged, or the device stopped: no engine will touch it
	d.channels[ch.id].Store(nil)
	if ch.ctx != nil {
		ch.ctx.removeChannel(ch)
	}
	return nil
}

// ANCHOR_END: closechannel

// Context returns the context the channel's commands run in, or nil for an
// engine's default channel (whose commands name their own).
func (ch *Channel) Context() *Context { return ch.ctx }

// SchedStats counts what the engines' schedulers did since the device was
// opened.
type SchedStats struct {
	Preempts uint64 // commands preempted half-way and saved
	Switches uint64 // switches from one channel to another
	Timeouts uint64 // commands the watchdog stopped
	Resets   uint64 // engine resets: stopped commands that never reached a preemption point
}

// SchedStats returns the engines' scheduler counters, summed.
func (d *Driver) SchedStats() SchedStats {
	var s SchedStats
	for e := range abi.Engine(abi.NumEngines) {
		page := abi.EngineStatusPage(e)
		s.Preempts += d.regs.Load(page + abi.RegPreempts)
		s.Switches += d.regs.Load(page + abi.RegSwitches)
		s.Timeouts += d.regs.Load(page + abi.RegTimeouts)
		s.Resets += d.regs.Load(page + abi.RegResets)
	}
	return s
}
