package device

import "softgpu/stage6-runlist/abi"

// Hooks are points where a test may act while an engine is in the middle
// of a command, to build an interleaving that timing alone makes rare —
// the driver's hooks (driver/hooks.go) are the same idea on the host side.
// They are not a feature: no driver sets them, and an engine with none set
// pays one load and a nil check per run.
type Hooks struct {
	// Resolved, if set, is called on engine e's goroutine each time it has
	// resolved a run of an operand at va (write: the command writes it),
	// before a byte of the run moves: the engine holds the run's
	// translation while it runs.
	Resolved func(e abi.Engine, va uint64, write bool)
	// Idle, if set, is called on engine e's goroutine each time it has
	// published that it is idle (goIdle, idle.go), which it does after
	// goIdleAfter empty polls: the engine holds no translation there. A test that blocks in it
	// stands for an idle engine whose thread the kernel has not run.
	Idle func(e abi.Engine)
}

// SetHooks installs h, at any time: an engine idles before the first
// command, so it may be reading the hooks already.
func (d *Device) SetHooks(h Hooks) { d.hooks.Store(&h) }
