package driver

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"softgpu/stage9-chardev/abi"
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

	// For a channel whose commands another process submits — a client of
	// the daemon (package server) — two calls. Share is called with the
	// channel's id after the id is chosen and before the channel is
	// listed, while no engine reads its pages: the daemon moves them into
	// memory the client maps (device.Share). Notify stands in for the
	// channel's waiters, which live in the client: wherever the driver
	// would signal them — a fault, the device stopping, and a fence
	// interrupt if the device raised one on the line rather than on the
	// channel's own vector (device.Share) — it calls Notify instead and
	// touches nothing of the channel's user page, which is the client's to
	// write. Unshare is called when the
	// channel has left its runlist, before its id is free for another:
	// the daemon gives its pages back to private memory there, so that no
	// NewChannel can pick the id while they are still the client's. All
	// three nil for a channel of this process.
	Share   func(abi.Channel) error
	Notify  func()
	Unshare func(abi.Channel)
	// Start, if not nil, leaves the channel unlisted: NewChannel returns
	// it unstarted, and Channel.Start calls Start with its id — while no
	// engine reads its pages — and lists it only if that returns nil.
	// The daemon's client must first make every page Share moved its own
	// (device.Start). Until then nothing of the driver reads or writes
	// the channel's pages: it is in no list the driver walks (liveChannels),
	// and a submission on it fails with ErrNotStarted.
	Start func(abi.Channel) error
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
	// ids guards taken: which channel ids are spoken for, by a channel
	// open or opening, or by one that left a list its engine has yet to
	// acknowledge. A leaf, held for a moment.
	ids   sync.Mutex
	taken [abi.NumChannels]bool

	// engine[e] serialises changes to engine e's list — entries[e],
	// owed[e], release[e] — and is held while waiting for e's
	// acknowledgement (one command long at most, and never past
	// commandBound). One lock per engine, not one for the device: held
	// across a wait, a device-wide lock let a stranger's SPIN on the copy
	// engine hold up every channel open and close on the compute engine,
	// every client's, for as long as the bound (up to 4 s a time;
	// TestAStuckCallOnOneEngineHoldsUpNoChannelOfTheOther). Only ids is
	// taken under it.
	engine [abi.NumEngines]sync.Mutex

	area    uint64 // device PA of the scheduler's area
	entries [abi.NumEngines][]abi.RunlistEntry
	// owed[e] is the generation engine e did not acknowledge within its
	// bound, until it does (0: none). Until then the table is the
	// engine's to read at any moment, and no new one is written.
	owed [abi.NumEngines]uint64
	// release[e] holds what channels that left e's list while it was
	// owed still keep — id, state block, save area, shared pages — to be
	// given back once e has taken a list without them: the next
	// acknowledged submit.
	release [abi.NumEngines][]func()
	// unstarted[e] counts e's channels opened and not yet listed
	// (ChannelOptions.Start): they hold their places on e's list, so that
	// a Start is never refused for want of one.
	unstarted [abi.NumEngines]int
}

// takeID speaks for the lowest channel id not spoken for (the ones below
// abi.NumEngines are the engines' default channels), or reports that
// there is none.
func (rl *runlists) takeID() (abi.Channel, bool) {
	rl.ids.Lock()
	defer rl.ids.Unlock()
	for id := abi.Channel(abi.NumEngines); id < abi.NumChannels; id++ {
		if !rl.taken[id] {
			rl.taken[id] = true
			return id, true
		}
	}
	return 0, false
}

// giveID frees id for another channel: its channel is gone from
// d.channels, and from every list an engine may still read.
func (rl *runlists) giveID(id abi.Channel) {
	rl.ids.Lock()
	defer rl.ids.Unlock()
	rl.taken[id] = false
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
// the engine has taken it or refused it. The caller holds
// d.runlists.engine[e].
//
// The wait has a deadline, commandBound (bound.go): the engine takes a
// list only between commands. Past it submitRunlist returns an error
// wrapping ErrTimeout and the engine owes the acknowledgement: the table
// stays as written (the engine may read it whenever it gets there), so
// later submits fail at once until the engine has taken it, and a channel
// that left the list meanwhile keeps what it holds (rl.release) until a
// list without it has been taken.
func (d *Driver) submitRunlist(e abi.Engine) error {
	rl := &d.runlists
	status := abi.EngineStatusPage(e)
	if owed := rl.owed[e]; owed != 0 {
		if d.regs.Load(status+abi.RegRunlistAck) != owed {
			if d.stopped() {
				return ErrClosed
			}
			return hungError(e, fmt.Sprintf("take runlist %d (still owed)", owed), d.commandBound(e))
		}
		rl.owed[e] = 0
	}
	if rl.entries[e] == nil {
		def := d.channels[abi.DefaultChannel(e)].Load()
		rl.entries[e] = []abi.RunlistEntry{entryFor(def)}
	}
	entries, table := rl.entries[e], rl.table(e)
	mem := d.hw.Memory()
	for i, ent := range entries {
		ent.Encode(mem[table+uint64(i)*abi.RunlistEntrySize:])
	}
	control := abi.EngineControlPage(e)
	d.regs.Store(control+abi.RegRunlistBase, table)
	d.regs.Store(control+abi.RegRunlistLen, uint64(len(entries)))
	// The generation is stored last: an engine that loads it sees the base,
	// the length and the table (plain stores before an atomic one). Then
	// wake the engine, which may be asleep; it takes the list at its next
	// safe point, between commands.
	gen := d.regs.Load(status+abi.RegRunlistAck) + 1
	d.regs.Store(control+abi.RegRunlistGen, gen)
	d.hw.WakeEngine(e)
	taken := func() bool { return d.regs.Load(status+abi.RegRunlistAck) == gen } // pairs with the engine's store in checkRunlist
	bound := d.commandBound(e)
	if spinBounded(func() bool { return taken() || d.stopped() }, bound) != nil {
		rl.owed[e] = gen
		return hungError(e, fmt.Sprintf("take runlist %d", gen), bound)
	}
	if !taken() {
		d.releaseLeft(e) // stopped: no engine will touch them
		return ErrClosed
	}
	if rerr := abi.RunlistError(d.regs.Load(status + abi.RegRunlistError)); rerr != abi.RunlistOK {
		return fmt.Errorf("%w: %v: %w", ErrRunlist, e, rerr) // refused: the engine keeps its old list, and may serve them
	}
	d.releaseLeft(e) // e has taken a list without them
	return nil
}

// releaseLeft gives back what the channels that left e's list while it
// owed an acknowledgement still hold (rl.release). The caller holds
// d.runlists.engine[e].
func (d *Driver) releaseLeft(e abi.Engine) {
	rl := &d.runlists
	release := rl.release[e]
	rl.release[e] = nil
	for _, f := range release {
		f()
	}
}

// ANCHOR_END: submit

// ANCHOR: newchannel

// NewChannel opens a channel on engine e for context c, served as opts
// says: a channel id of its own, a state block in device memory for the
// commands the engine preempts, and an entry on the engine's runlist. It
// returns once the engine has taken the new runlist — or, with
// opts.Start, at once, the channel unstarted: Channel.Start lists it.
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
	id, ok := rl.takeID()
	if !ok {
		return nil, fmt.Errorf("%w: all %d channels are open", ErrNoChannel, abi.NumChannels)
	}
	rl.engine[e].Lock()
	defer rl.engine[e].Unlock()
	if len(rl.entries[e])+rl.unstarted[e] >= abi.MaxRunlist {
		rl.giveID(id)
		return nil, fmt.Errorf("%w: %v already serves %d channels", ErrRunlist, e, abi.MaxRunlist)
	}
	state := rl.stateBlock(id)
	clear(d.hw.Memory()[state : state+abi.ChannelStateSize]) // on no runlist: no engine reads it
	ch, err := d.newChannel(id, e)
	if err != nil {
		rl.giveID(id)
		return nil, err
	}
	ctxSave, err := d.allocContextSave() // ctxsave.go
	if err != nil {
		rl.giveID(id)
		return nil, err
	}
	ch.ctx, ch.ctxID, ch.prio, ch.slice, ch.state, ch.notify = c, c.id, opts.Priority, opts.Timeslice, state, opts.Notify
	ch.unshare, ch.ctxSave = opts.Unshare, ctxSave
	if d.wake == WakeEvery && opts.Notify == nil {
		d.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqEvery)
	}
	if opts.Share != nil {
		if err := opts.Share(id); err != nil {
			d.freeContextSave(ctxSave)
			rl.giveID(id)
			return nil, err
		}
	}
	if !c.addChannel(ch) { // closed meanwhile
		if opts.Unshare != nil {
			opts.Unshare(id)
		}
		d.freeContextSave(ctxSave)
		rl.giveID(id)
		return nil, ErrClosed
	}
	if opts.Start != nil { // listed by Channel.Start
		ch.start = opts.Start
		ch.unstarted.Store(true)
		rl.unstarted[e]++
		return ch, nil
	}
	if err := d.listLocked(ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// listLocked puts ch, made by NewChannel and on no list, on its engine's
// runlist, and returns once the engine has taken the list. If it did not,
// ch is gone, and what it held is given back (or will be, once the engine
// has taken a list without it). The caller holds runlists.engine[ch.engine].
func (d *Driver) listLocked(ch *Channel) error {
	rl := &d.runlists
	e, id, c, ctxSave := ch.engine, ch.id, ch.ctx, ch.ctxSave
	d.channels[id].Store(ch)
	rl.entries[e] = append(slices.Clip(rl.entries[e]), entryFor(ch))
	if err := d.submitRunlist(e); err != nil {
		ch.gone.Store(true) // a Close from the context's Close, waiting for engine[e], does nothing
		rl.entries[e] = rl.entries[e][:len(rl.entries[e])-1]
		if errors.Is(err, ErrTimeout) {
			// The engine may yet take the list that names ch: its id,
			// state block, save area and pages stay until it has taken
			// one without it.
			ch.removed.Store(true)
			c.removeChannel(ch)
			rl.release[e] = append(rl.release[e], func() {
				if ch.unshare != nil {
					ch.unshare(id)
				}
				d.freeContextSave(ctxSave)
				d.channels[id].Store(nil)
				rl.giveID(id)
			})
			return err
		}
		if ch.unshare != nil {
			ch.unshare(id)
		}
		d.channels[id].Store(nil)
		rl.giveID(id)
		c.removeChannel(ch)
		d.freeContextSave(ctxSave) // refused, or the device stopped: no engine will touch it
		return err
	}
	return nil
}

// ANCHOR_END: newchannel

// Start lists a channel NewChannel left unstarted (ChannelOptions.Start):
// it calls the option's Start while the channel is on no list, and lists
// the channel only if that succeeds; if it fails, the channel stays as
// it was, and may be started again. It returns once the engine has taken
// the new list, as NewChannel does for a channel it lists itself, and
// ErrClosed for a channel closed meanwhile.
func (ch *Channel) Start() error {
	d := ch.d
	rl := &d.runlists
	e := ch.engine
	rl.engine[e].Lock()
	defer rl.engine[e].Unlock()
	switch {
	case ch.gone.Load(): // Close sets it before it waits for engine[e]: it finds the channel unstarted, and releases it
		return ErrClosed
	case ch.start == nil:
		return fmt.Errorf("%w: %v is started already", ErrRunlist, ch.id)
	}
	if err := ch.start(ch.id); err != nil {
		return err
	}
	ch.start = nil
	rl.unstarted[e]--
	ch.unstarted.Store(false)
	return d.listLocked(ch)
}

// ANCHOR: closechannel

// Close takes the channel off its engine's runlist. A command submitted
// before Close and not yet run completes with abi.StatusRemoved (its
// waiter gets that error); a submission after it fails with ErrClosed. It
// returns once the engine has let the channel go; the channel's id and
// state block are then free for another. The engines' default channels
// cannot be closed.
func (ch *Channel) Close() error {
	if ch.closer != nil {
		return ch.closeAttached() // client.go
	}
	d := ch.d
	if ch.id < abi.NumEngines {
		return fmt.Errorf("%w: %v is an engine's default channel", ErrNoChannel, ch.id)
	}
	if ch.gone.Swap(true) {
		return nil
	}
	rl := &d.runlists
	e := ch.engine
	rl.engine[e].Lock()
	defer rl.engine[e].Unlock()
	if ch.start != nil { // never listed: no engine has seen it, and no waiter waits on it
		ch.start = nil
		rl.unstarted[e]--
		ch.removed.Store(true)
		ch.release()
		return nil
	}
	rl.entries[e] = slices.DeleteFunc(slices.Clone(rl.entries[e]), func(ent abi.RunlistEntry) bool { return ent.Channel == ch.id })
	err := d.submitRunlist(e)
	// Off the runlist (or the device stopped): nothing more of the channel
	// will complete. Waiters for commands the drain did not reach — a
	// submitter that passed its check before gone was set and rang the
	// doorbell after the drain — settle now, on ErrClosed.
	ch.removed.Store(true)
	ch.timeline.wakeAll()
	if errors.Is(err, ErrTimeout) {
		// The engine may still serve the channel: what it holds is given
		// back once the engine has taken a list without it.
		rl.release[e] = append(rl.release[e], ch.release)
		return err
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return err // refused: the device keeps the old list, and the channel on it
	}
	ch.release()
	return nil
}

// release gives back what a channel off its engine's list held: its
// shared pages, its save area, its id. The engine has acknowledged a list
// without it, or the device has stopped: no engine will touch it.
func (ch *Channel) release() {
	ch.released.Store(true) // after the acknowledgement: retired (pinned.go) passes it every mark from here
	d := ch.d
	if ch.unshare != nil {
		ch.unshare(ch.id) // off the runlist, and the id not yet free
	}
	d.freeContextSave(ch.ctxSave)
	d.channels[ch.id].Store(nil)
	d.runlists.giveID(ch.id)
	if ch.ctx != nil {
		ch.ctx.removeChannel(ch)
	}
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
