//go:build exercise

package driver

// The checker of exercise 7.4, "Make adaptive the default"
// (book/stage7-idle.md):
//
//	go test -tags exercise -run Exercise7_4 ./driver
//
// It reads what an engine does when nobody has chosen: RegIdleMode of every
// engine of a device just opened (the reset value), and of a device under a
// driver made with the zero Config (the driver's default). Both must be
// IdleAdaptive. A driver asked for hybrid must still get hybrid: the
// default moved, the choice did not go away.

import (
	"testing"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/device"
	"softgpu/stage7-idle/mmio"
)

func TestExercise7_4(t *testing.T) {
	mode := func(regs *mmio.Registers, e abi.Engine) abi.IdleMode {
		return abi.IdleMode(regs.Load(abi.EngineControlPage(e) + abi.RegIdleMode))
	}
	// Each in a subtest of its own: each helper's leak check runs when
	// its subtest ends, after that subtest's device has closed.
	t.Run("reset", func(t *testing.T) {
		dev := openBare(t)
		for e := range abi.Engine(abi.NumEngines) {
			if got := mode(dev.Registers(), e); got != abi.IdleAdaptive {
				t.Errorf("%v engine of a device just opened: RegIdleMode is %v; want adaptive, the new reset value (device/idle.go, resetIdle)", e, got)
			}
		}
	})
	t.Run("default", func(t *testing.T) {
		d := openWith(t, device.Config{}, Config{})
		for e := range abi.Engine(abi.NumEngines) {
			if got := mode(d.regs, e); got != abi.IdleAdaptive {
				t.Errorf("%v engine under a driver made with the zero Config: RegIdleMode is %v; want adaptive, the driver's new default", e, got)
			}
		}
	})
	t.Run("hybrid", func(t *testing.T) {
		d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: IdleHybrid, Budget: abi.DefaultIdleBudget}})
		for e := range abi.Engine(abi.NumEngines) {
			if got := mode(d.regs, e); got != abi.IdleHybrid {
				t.Errorf("%v engine under a driver asked for hybrid with the default budget: RegIdleMode is %v; want hybrid", e, got)
			}
		}
	})
}
