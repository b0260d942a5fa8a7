package driver

import "softgpu/stage4-nolock/abi"

// Hooks are points where a test or a benchmark may stop a driver goroutine,
// to show what happens to everyone else while one submitter is held, or
// run something of its own in the submitter's place (Published), or choose
// a wait's poll budget (WaitBudget). They are not a feature: production
// code never sets them.
type Hooks struct {
	// Reserved, if set, is called by a submitter that has reserved its
	// ring indices on channel c and has not yet written its commands.
	Reserved func(c abi.Channel)
	// Publishing, if set, is called by the goroutine that holds channel
	// c's publishing flag, just before it lets go of it.
	Publishing func(c abi.Channel)
	// Published, if set, is called by the goroutine that holds channel
	// c's publishing flag, right after it has stored the doorbell. A
	// benchmark with a stepped device runs the engine's side of the
	// commands from here (device/stepped.go).
	Published func(c abi.Channel)
	// WaitBudget, if set and returning a non-zero number of cycles, is
	// the poll budget of the next hybrid wait, in place of the one the
	// channel would choose (budgetFor) — the estimate still learns from
	// the copy. A benchmark that alternates two budgets copy by copy on
	// one channel sets it (BenchmarkCopyWaitAlternate), so both budgets
	// meet the same engine, cores and moment. It is called by the waiting
	// goroutine, just before it polls.
	WaitBudget func() uint64
	// Retiring, if set, is called by a wait for something freed to
	// retire (register's, for a window entry), after it has copied what
	// it waits for and let go of the lock, just before it polls: the
	// window in which a listed one may retire, or a new one join, unseen
	// by the copy. A test that holds a free, or the work a free waits
	// for, lets it go there and sees it through, so its case turns on no
	// timing.
	Retiring func()
}

// SetHooks installs h. Call it before any submission, from a test or a
// benchmark only.
func (d *Driver) SetHooks(h Hooks) { d.hooks = h }
