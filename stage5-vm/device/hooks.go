package device

import "softgpu/stage5-vm/abi"

// Hooks are points where a test may act while an engine is in the middle
// of a command, to build an interleaving that timing alone makes rare —
// the driver's hooks (driver/hooks.go) are the same idea on the host side.
// They are not a feature: no driver sets them, and an engine with none set
// pays one nil check per run.
type Hooks struct {
	// Resolved, if set, is called on engine e's goroutine each time it has
	// resolved a run of an operand at va (write: the command writes it),
	// before a byte of the run moves: the engine holds the run's
	// translation while it runs.
	Resolved func(e abi.Engine, va uint64, write bool)
}

// SetHooks installs h. Call it before the first command is submitted;
// the doorbell that submits it orders the store before the engines' loads.
func (d *Device) SetHooks(h Hooks) { d.hooks = h }
