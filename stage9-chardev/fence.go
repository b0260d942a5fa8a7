package softgpu

import (
	"context"

	"softgpu/stage9-chardev/driver"
)

// Fences. Every Pending carries the Fence its last command signals; a
// Fence can be waited on, with or without a context, tested without
// waiting, and combined with fences of the other engine.

// Fence is a point on one channel's timeline; see driver.Fence.
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

// Waiter is anything WaitAll can wait for: a *Pending, or a Fence.
type Waiter interface {
	WaitContext(ctx context.Context) error
}

// WaitAll waits until every batch or fence, on either engine, has finished,
// or ctx is done. It returns the first error: a batch's, or ctx.Err().
func WaitAll(ctx context.Context, ws ...Waiter) error {
	for _, w := range ws {
		if err := w.WaitContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stats returns the interrupt and wake-up counters since Open.
func (g *GPU) Stats() Stats { return g.drv.Stats() }
