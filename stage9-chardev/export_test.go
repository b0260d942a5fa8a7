package softgpu

import "softgpu/stage9-chardev/driver"

// SetHooks installs driver hooks, for the benchmarks that hold a submitter
// at a chosen point (bench_submit_test.go). Test builds only.
func (g *GPU) SetHooks(h driver.Hooks) { g.drv.SetHooks(h) }
