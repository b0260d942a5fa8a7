package server

import (
	"fmt"
	"sync"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// Hang bars: what the daemon does about a user whose command hung an
// engine.
//
// The watchdog (device/watchdog.go) bounds one command: it asks a command
// that has run past its limit to stop at its next preemption point, and
// resets the engine under one that has not reached one a limit later. A
// SPIN — a shader in an endless loop — never does, so it holds its engine
// for two limits (4 s with softgpud's default) if nobody else wants it;
// if somebody does, the engine asks it to give way and resets under it a
// preempt timeout later (device/preempttimeout.go; 640 ms by default).
// Bounding the command was not enough: a stranger with a context and a
// channel on each engine ran a SPIN on both, and again on a fresh context
// after every reset, and every other client's round trip took up to 4 s
// for as long as it liked (TestAStrangerCannotHoldBothEnginesWithSpins).
//
// So the daemon judges the user, not only the command, as DRM drivers do:
// i915 counts a context's hangs and bans it (its later execbuf fails), and
// refuses a client that keeps hanging the GPU new contexts; amdgpu marks
// the context whose job hung guilty and refuses its later submissions.
// Here a reset under a command of a client's context (counted by the
// device in the context's RegCtxResets: driver.Context.Resets) strikes
// the client's uid (strikeHang):
//
//   - the uid is barred for a while (hangBars): its ATTACH and
//     CHANNEL_OPEN fail with ErrBusy, so it cannot make a fresh context
//     to hang the engines again;
//   - every context of its clients is banned on the device
//     (driver.Context.Ban): a command of them that has not started never
//     will. Barring new contexts alone does not stop a stranger that made
//     its contexts, or queued its SPINs, before the first reset
//     (TestAStrangerCannotHoldBothEnginesWithPreparedContexts); and
//     closing them does not stop them at once, since a hung engine
//     acknowledges nothing until it is reset;
//   - every connection of the uid is hung up, and torn down as at its
//     close: a banned context is of no use to its client, which now sees
//     the device gone (its calls fail; client.ErrGone), and what it held
//     goes back.
//
// The uid is the unit, as for every quota and the pager's bars
// (pagerBars): a stranger cannot make more of them, and its connections
// are all its own.
//
// The first hang cannot be prevented, and no bar here shortens it: until
// the reset nothing tells a SPIN from a long shader that will reach its
// next preemption point, and the reset comes two limits after the command
// began, or a preempt timeout after someone wanted its engine. Nor the
// hang of a command already on an engine when the strike lands: the engine
// starts its next command as soon as it is reset, before the daemon's
// interrupt handler can look (a real driver halts the engine for recovery;
// this device resumes by itself), so a stranger with SPINs of other
// contexts queued behind the first may hold an engine one round more. What
// the bar bounds is how often: a uid can hang the engines about once per
// bar — with a command the engine has to be reset under. That includes a
// SPIN that would end before the watchdog's reset (one and a half
// limits): the engine is reset under it, and the reset counted, once it
// has kept another channel waiting a preempt timeout
// (TestAStrangerCannotHoldAnEngineWithSpinsThatEndBeforeTheReset); one
// that keeps nobody waiting is never reset, and holds up nobody. The
// first bar lasts hangBarFirst; a strike while barred is part of the
// incident that set the bar (no context of the uid made after it exists,
// so its command began before) and changes nothing; a strike within the
// bar's length after it ended doubles it, up to hangBarMost; one later
// starts again at hangBarFirst: the bar decays.
//
// Who is struck. Only the uid of the context whose command the reset
// stopped: the device counts the reset in that context alone. A command
// of another channel that was in flight on the engine, preempted and
// saved, is resumed from its saved cursor after the reset
// (device/watchdog.go, resetEngine), is not faulted, and its client hears
// nothing (TestResetsCountsOnlyTheContextWhoseCommandHung in driver/,
// TestAnInnocentOnAResetEngineIsNotBarred). A command the watchdog stopped
// at a preemption point (a DELAY past the limit) is faulted, but it gave
// its engine way at every boundary before, held nobody up, and counts no
// reset. Root and the daemon's own user are never barred (seesAll): either
// can stop the daemon anyway, and a bar would lock out only its
// administrator.
//
// When the daemon looks. The device counts a reset before it faults the
// channel and raises the interrupt (device/sched.go, hang), so the
// channel's Notify (channelNotify), which the daemon's interrupt handler
// calls for the fault, finds it. A channel its client is closing, or
// whose client has gone, may have left the driver's list before the
// handler reads it, and bring no Notify; its close waits until the
// engine has taken a runlist without it, which a hung engine does only
// after the reset, so closeChannel looks again after it — before the
// context can be closed and its id given to another.

// hangBars is the uids barred from new contexts after a reset under a
// command of theirs. The map holds a uid from its first strike until its
// bar has ended and its length again has passed (prune): a uid with a
// context, so at most MaxContexts at a time, and never more than twice
// what the last prune left.
type hangBars struct {
	mu      sync.Mutex
	byUID   map[uint32]hangBar
	pruneAt int // the size of byUID at which strike next prunes it
}

// hangBar is one uid's bar.
type hangBar struct {
	until time.Time     // barred until then
	last  time.Duration // the length of the latest bar
}

// The bar's lengths. A round of SPINs holds the engines two watchdog
// limits (4 s by default); a first bar of 30 s lets a uid do that at most
// once in 30 s, then once in a minute, and so on, while a user whose
// shader hung by mistake waits half a minute to try again.
const (
	hangBarFirst = 30 * time.Second
	hangBarMost  = time.Hour
)

// barred reports whether uid is barred at now, and until when.
func (b *hangBars) barred(uid uint32, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bar, ok := b.byUID[uid]
	return bar.until, ok && now.Before(bar.until)
}

// strike bars uid from now: for hangBarFirst, or for twice the latest bar
// if the strike comes within its length after it ended. A strike while
// barred changes nothing. It returns the end of the bar, and whether this
// strike began it.
func (b *hangBars) strike(uid uint32, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byUID == nil {
		b.byUID = make(map[uint32]hangBar)
	}
	bar := b.byUID[uid]
	if now.Before(bar.until) {
		return bar.until, false
	}
	length := hangBarFirst
	if bar.last > 0 && now.Before(bar.until.Add(bar.last)) {
		length = min(2*bar.last, hangBarMost)
	}
	bar.until, bar.last = now.Add(length), length
	b.byUID[uid] = bar
	if len(b.byUID) > max(pruneAbove, b.pruneAt) {
		b.prune(now)
		b.pruneAt = 2 * len(b.byUID) // a sweep costs each strike O(1)
	}
	return bar.until, true
}

// prune forgets the bars past the window in which a strike would double
// them: a uid with none is as if it had never been struck. The caller
// holds b.mu.
func (b *hangBars) prune(now time.Time) {
	for uid, bar := range b.byUID {
		if now.After(bar.until.Add(bar.last)) {
			delete(b.byUID, uid)
		}
	}
}

// refuseBarred returns an error wrapping uapi.ErrBusy if the client's uid
// is barred, for call (ATTACH, CHANNEL_OPEN), or nil.
func (c *client) refuseBarred(call string) error {
	now := time.Now()
	if until, barred := c.s.hangs.barred(c.uid, now); barred {
		return fmt.Errorf("%s: uid %d is barred for %v more: an engine was reset under a command of its (softgpud -watchdog, -preempt-timeout): %w",
			call, c.uid, until.Sub(now).Round(time.Second), uapi.ErrBusy)
	}
	return nil
}

// channelNotify is the Notify of each of the client's channels, which the
// daemon's interrupt handler calls for a fault among other things: it
// tells the client (notify), then looks for a reset (judgeHangs). Both
// take only locks of this client's: driver.Context.Resets loads a
// register and an atomic. The interrupt thread serves every client, and
// waiting there on the driver's list of contexts (vm.mu) would hold up
// every other client's interrupts behind any NewContext or Close.
func (c *client) channelNotify() {
	c.notify()
	c.judgeHangs()
}

// judgeHangs strikes the client's uid once for each look that finds a
// reset under its context not yet judged. Any goroutine may call it: the
// interrupt handler (channelNotify) and serve (closeChannel) race to the
// same count, and resetsJudged lets one of them strike for it.
func (c *client) judgeHangs() {
	c.mu.Lock()
	ctx := c.ctx
	c.mu.Unlock()
	if ctx == nil {
		return
	}
	resets := ctx.Resets() // 0 once closed: the id may be another's
	for {
		judged := c.resetsJudged.Load()
		if resets <= judged {
			return
		}
		if c.resetsJudged.CompareAndSwap(judged, resets) {
			break
		}
	}
	c.s.strikeHang(c, ctx.ID(), resets)
}

// strikeHang strikes c's uid for a reset under a command of its context
// ctx (the log names it), which has counted resets in all: the uid
// is barred, every context of its clients banned and every connection of
// its hung up. It never waits on the device or on a client: s.mu, each
// client's mu and the driver's vm.mu are held one at a time, briefly, and
// a hang-up is a shutdown(2).
func (s *Server) strikeHang(c *client, ctx abi.Context, resets uint64) {
	if c.seesAll() {
		s.log.Info("a reset under a command of root's or the daemon's user's: not barred", "pid", c.pid, "uid", c.uid, "context", ctx, "resets", resets)
		return
	}
	until, began := s.hangs.strike(c.uid, time.Now())
	// The bar is set before the clients are listed: a connection admitted
	// after the list below finds it at ATTACH, and one admitted before is
	// on the list, attached or not.
	s.mu.Lock()
	var theirs []*client
	for _, x := range s.clients {
		if x.uid == c.uid {
			theirs = append(theirs, x)
		}
	}
	s.mu.Unlock()
	for _, x := range theirs {
		x.mu.Lock()
		ctx := x.ctx
		x.mu.Unlock()
		if ctx != nil {
			ctx.Ban() // before the hang-up: its teardown takes a while, and the engines do not wait
		}
		hangUp(x.conn) // discard.go: its serve loop sees EOF and tears it down
	}
	if began {
		s.log.Warn("uid barred: an engine was reset under a command of its", "uid", c.uid, "pid", c.pid, "context", ctx,
			"until", until.Format(time.RFC3339), "connections hung up", len(theirs))
	}
}
