package device

import "softgpu/stage0-mailbox/abi"

// A stepped device (Config.Stepped) has no engine goroutines: an engine
// runs its next command when Step is called, on the caller's goroutine,
// and at no other time. It is a measuring instrument.
//
// What it measures: a round trip costs the time its cache lines take to
// cross between two cores, plus the time its code takes to run on them.
// Baseline/handoff measures the first with almost no code; a stepped
// device measures the second with no crossing. A benchmark installs a
// driver hook that runs right after the doorbell store
// (driver.Hooks.Published) and calls Step from it, so the engine's side
// of the command runs between the host's publish and its wait, on the
// same goroutine, with every line it touches already in that core's
// cache; the wait then finds the completion at its first look
// (BenchmarkRoundTripStepped). Neither figure alone is a round trip, and
// their sum is not one either: each side's bookkeeping after a crossing
// overlaps the other side's work, so a round trip comes in under the sum.
// In the roundtrip record at f0bd540, RoundTripFloor's floor-ratio (round
// trip over handoff plus stepped) reads 0.70 at the median in stage 0
// (0.63-0.93 over five passes), and in three of those passes the round
// trip beat the bare handoff alone; its onpath-share says how much of a
// stage's code a round trip could not overlap.
//
// A stepped device is not the device: nothing runs unless asked, so a
// driver that waits for a command nobody steps waits forever.

// Step runs engine e's next command, if there is one, and reports whether
// there was. Only a stepped device steps, and only one goroutine at a
// time may call Step (an engine is one thread of execution, whoever runs
// it).
func (d *Device) Step(e abi.Engine) bool {
	if !d.cfg.Stepped || e >= abi.NumEngines {
		return false
	}
	return d.engines[e].step()
}

// StopStepped stops a stepped device's engines as ControlStop stops
// running ones: each publishes that it has stopped, and the last that the
// device has. A driver's Close waits for DeviceStopped, so call it first;
// Close calls it too, for a device closed without a driver. It does
// nothing to a device that is not stepped, and nothing the second time.
func (d *Device) StopStepped() {
	if !d.cfg.Stepped {
		return
	}
	d.stepStop.Do(func() {
		d.regs.Store(abi.RegControl, abi.ControlStop)
		for _, e := range d.engines {
			e.stop()
		}
	})
}
