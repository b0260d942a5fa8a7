package softgpu

import "softgpu/stage9-chardev/driver"

// Idle gating. An engine with an empty ring spins, sleeps, spins for a
// budget of cycles and then sleeps (the default, 50 µs), or spins for a
// budget it learns from the gaps between commands (adaptive). A sleeping
// engine costs no CPU; the first command after it fell asleep pays for
// waking it. Config.Idle and its budgets set both engines at Open; SetIdle
// changes one engine at any time.

// IdleMode is what an engine does when it has no work.
type IdleMode = driver.IdleMode

// Idle modes for Config.Idle and SetIdle.
const (
	IdleHybrid   = driver.IdleHybrid
	IdleSpin     = driver.IdleSpin
	IdleSleep    = driver.IdleSleep
	IdleAdaptive = driver.IdleAdaptive
)

// SetIdle sets engine e's idle mode and, for IdleHybrid, its spin budget in
// cycles (zero: 50,000). It takes effect at once, on a sleeping engine too.
func (g *GPU) SetIdle(e Engine, mode IdleMode, budget uint64) error {
	return g.drv.SetIdle(e, driver.Idle{Mode: mode, Budget: budget})
}
