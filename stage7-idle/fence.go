package softgpu

import (
	"context"

	"softgpu/stage7-idle/driver"
)

// Fences (stage 2). Every Pending carries the Fence its last command
// signals; a Fence can be waited on with a context, tested without waiting,
// and combined with fences of the other engine.

// Fence is a point on one engine's timeline; see driver.Fence.
type Fence = driver.Fence

// Wait modes, interrupt delivery paths and wake-up policies for Config.
const (
	WaitHybrid = driver.WaitHybrid
	WaitPoll   = driver.WaitPoll
	WaitBlock  = driver.WaitBlock

	IRQDirect    = driver.IRQDirect
	IRQThreaded  = driver.IRQThreaded
	IRQWorkqueue = driver.IRQWorkqueue

	WakeTargeted = driver.WakeTargeted
	WakeEvery    = driver.WakeEvery
)

// Stats counts interrupts and wake-ups; see driver.Stats.
type Stats = driver.Stats

// Delivery, Wake and WaitMode name the options of Config.
type (
	Delivery = driver.Delivery
	Wake     = driver.Wake
	WaitMode = driver.WaitMode
)

// WaitAll waits until every pending batch, on either engine, has finished,
// or ctx is done. It returns the first error: a batch's, or ctx.Err().
func WaitAll(ctx context.Context, ps ...*Pending) error {
	for _, p := range ps {
		if err := p.WaitContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Now returns the device clock in cycles (nanoseconds since Open), the clock
// of Fence.SignaledAt.
func (g *GPU) Now() uint64 { return g.dev.Clock().Now() }

// Stats returns the interrupt and wake-up counters since Open.
func (g *GPU) Stats() Stats { return g.drv.Stats() }
