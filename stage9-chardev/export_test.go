package softgpu

import (
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
)

// SetHooks installs driver hooks, for the benchmarks that hold a submitter
// at a chosen point (bench_submit_test.go). Test builds only.
func (g *GPU) SetHooks(h driver.Hooks) { g.drv.SetHooks(h) }

// OpenStepped opens a GPU on a stepped device (device/stepped.go): the
// driver's hook after each doorbell runs the engine's side of the commands
// on the submitter's own goroutine, so that a call returns having run the
// whole path on one core. The hook steps the channel's engine until it
// finds nothing to run, so it ends with one empty fetch: the poll a
// running engine makes next, after the completion and so off a round
// trip's path there, on it here. stop closes the GPU: it stops the
// engines, which no goroutine of the device's own is there to do, then
// closes the GPU. Test builds only.
func OpenStepped(cfg Config) (g *GPU, stop func(), err error) {
	g, dev, err := open(cfg, true)
	if err != nil {
		return nil, nil, err
	}
	g.SetHooks(driver.Hooks{Published: func(c abi.Channel) {
		// A channel is on whichever engine's runlist the driver put it:
		// step the engine whose default channel c is, or, for any other
		// channel, every engine.
		for e := range abi.Engine(abi.NumEngines) {
			if abi.DefaultChannel(e) == c {
				for dev.Step(e) {
				}
				return
			}
		}
		for e := range abi.Engine(abi.NumEngines) {
			for dev.Step(e) {
			}
		}
	}})
	return g, func() { dev.StopStepped(); g.Close() }, nil
}

// OpenWatched opens a GPU as Open does, and returns with it a function
// that reports whether engine e says, in its status page, that it is
// asleep (RegEngineState is EngineAsleep): what a test waits for before a
// gap the engine must sleep through. Test builds only.
func OpenWatched(cfg Config) (g *GPU, asleep func(e Engine) bool, err error) {
	g, dev, err := open(cfg, false)
	if err != nil {
		return nil, nil, err
	}
	return g, func(e Engine) bool {
		return dev.Registers().Load(abi.EngineStatusPage(e)+abi.RegEngineState) == abi.EngineAsleep
	}, nil
}
