package driver

import "softgpu/stage9-chardev/abi"

// A context guilty of a hang: stage 9 only. The daemon (softgpud) serves
// strangers, and a command that never reaches a preemption point (a
// shader in an endless loop; OpSpin) holds its engine until the watchdog
// resets it, two limits after it began, or, if another channel wants the
// engine, until the preempt timeout resets it (device/preempttimeout.go). So
// the daemon judges the client, as DRM drivers do (i915 bans a context,
// and then its client, after hangs; amdgpu marks the context whose job
// hung guilty and refuses its submissions): it counts the resets under
// each client's context (Resets) and, when one comes, stops every context
// of that user at once (Ban). server/hangbars.go is the policy; this file
// is what the driver gives it.
//
// Both look whether the context's id is still its own — Ban under vm.mu,
// Resets without a lock, by idFreed, which Close sets under vm.mu: Close
// frees the id under vm.mu, last, after every channel of the context has
// left its runlist, so after any reset under a command of it has been
// counted. (Unless an engine did not take a runlist without the channel
// within commandBound — the watchdog's two limits and more: then Close
// goes on without it, and a reset the engine made later still would be
// counted against the id's next context. An engine that far past its
// watchdog is taken as hung everywhere else in the driver too.)

// Resets returns how many times an engine has been reset under a command
// of the context since it was made, by the watchdog or at a preempt
// timeout (the device counts them in the context's RegCtxResets, before
// it faults the command's channel): commands that never reached a
// preemption point. A command the watchdog
// stopped at a preemption point faults its channel and context as well
// (FaultHung), but is not counted; nor is a command of another context
// that was in flight on the reset engine, which the engine resumes
// (device/watchdog.go, resetEngine). It returns 0 once the context is
// closed. It takes no lock and never waits on the device: softgpud's
// Notify calls it on the interrupt thread at every fault of a served
// channel, and a lock there — vm.mu, which every client's NewContext,
// Close and Ban take — would hold up every interrupt of the device
// behind its holder (TestANotifyLooksForResetsWithoutHoldingUpTheInterrupts).
func (c *Context) Resets() uint64 {
	// The count first, then whether the id is still c's.
	//
	// No count with a reset of a later context of the id in it is
	// returned. Close stores idFreed before it frees the id, both under
	// vm.mu; a NewContext that takes the id, under vm.mu after that,
	// enables the new context (enableContext's store of RegCtxFlags); the
	// engine's load of that flag (device/mmu.go, enterContext) comes
	// before it runs a command of the context, and so before its add of a
	// reset under it (device/sched.go, hang). A load of the count that
	// sees that add comes after all of these, and the load of idFreed
	// after it sees true.
	//
	// No reset under c is missed: the engine adds it to the count before
	// it faults the channel and raises the line (hang), so the fault's
	// Notify, called after the interrupt handler's load of
	// RegChannelFault, loads it here if the id is still c's; and the
	// daemon looks again once the channel has left its runlist (which a
	// hung engine lets it do only after the reset), before it closes the
	// context (server/hangbars.go), when idFreed is still false.
	count := c.d.regs.Load(abi.ContextStatusRegs(c.id) + abi.RegCtxResets)
	if c.idFreed.Load() {
		return 0
	}
	return count - c.resetsBase
}

// Ban disables the context on the device: from now on an engine that
// takes a command of it completes the command with abi.StatusBadContext
// (device/mmu.go, enterContext, which every command passes), so what is
// queued on its channels drains without running, and nothing submitted
// later runs. A command already running goes on until it ends or the
// watchdog stops it. The context keeps its mappings and channels until
// Close, which a banned context still needs; there is no unban.
//
// Closing the context would stop it too, but not at once: Close takes
// each channel off its engine and waits for the engine's acknowledgement,
// which a hung engine gives only once it is reset, and meanwhile the
// engine may start the next command of another context. Ban takes only
// vm.mu and never waits on the device: a channel's Notify may call it.
// After Close, or twice, it does nothing.
func (c *Context) Ban() {
	if c.id == 0 {
		return // the driver's own
	}
	c.d.vm.mu.Lock()
	defer c.d.vm.mu.Unlock()
	if c.d.vm.contexts[c.id] == c { // still this context's id: the store cannot disable another's
		c.d.regs.Store(abi.ContextRegs(c.id)+abi.RegCtxFlags, 0)
	}
}
