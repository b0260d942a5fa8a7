package driver

import (
	"container/heap"

	"softgpu/stage7-idle/abi"
)

// This file is the driver's interrupt handling (stage 2): the handler the
// device calls when it raises its interrupt line, and the three paths from
// there to the waiters, after the ones compared in seed 001's thread:
//
//	direct     engine raises → hardIRQ signals the waiters itself
//	threaded   engine raises → hardIRQ kicks the IRQ thread → it signals
//	workqueue  engine raises → hardIRQ kicks the IRQ thread → it queues work
//	           → a worker signals
//
// hardIRQ runs on the engine's goroutine, as a hard interrupt handler runs
// on whatever the CPU was doing, so it must not block: the kicks are
// non-blocking sends on channels of one, and a kick that finds one pending
// is merged with it (the thread signals every timeline each time it runs).
// Each hop after the first is a goroutine wake-up: the latency the
// FenceSignal benchmark compares.

// Delivery is the path from the interrupt to the waiters.
type Delivery int

const (
	IRQDirect Delivery = iota
	IRQThreaded
	IRQWorkqueue
)

func (d Delivery) String() string {
	switch d {
	case IRQDirect:
		return "direct"
	case IRQThreaded:
		return "threaded"
	case IRQWorkqueue:
		return "workqueue"
	}
	return "delivery(?)"
}

// Wake is when the device interrupts for a blocked waiter.
type Wake int

const (
	// WakeTargeted arms the interrupt for the least fence any waiter waits
	// for: no interrupt, and no wake-up, until a waiter's fence signals.
	WakeTargeted Wake = iota
	// WakeEvery interrupts on every fenced completion and wakes every
	// waiter, which re-checks its fence and sleeps again if it has not
	// signalled: the futile wake-ups targeting avoids, kept to measure them.
	WakeEvery
)

func (w Wake) String() string {
	switch w {
	case WakeTargeted:
		return "targeted"
	case WakeEvery:
		return "every"
	}
	return "wake(?)"
}

// Stats counts the driver's interrupt work since New.
type Stats struct {
	IRQs          uint64 // times the device raised the interrupt line
	Wakeups       uint64 // times a blocked waiter was woken
	FutileWakeups uint64 // wake-ups whose fence had not signalled
	EngineWakes   uint64 // doorbells that found their engine asleep and woke it (stage 7)
}

// Stats returns the interrupt counters.
func (d *Driver) Stats() Stats {
	return Stats{IRQs: d.irqs.Load(), Wakeups: d.wakeups.Load(), FutileWakeups: d.futileWakeups.Load(),
		EngineWakes: d.engineWakes.Load()}
}

// startIRQ connects the handler to the device's interrupt line and starts the
// goroutines the delivery path needs. In the untargeted mode it also arms
// every engine for every interrupt, once and for all.
func (d *Driver) startIRQ() {
	d.closing = make(chan struct{})
	d.irqKick = make(chan struct{}, 1)
	d.irqWork = make(chan struct{}, 1)
	d.irqStop = make(chan struct{})
	for e := range abi.Engine(abi.NumEngines) {
		d.timelines[e] = timeline{d: d, bank: abi.EngineRegs(e)}
		arm := uint64(abi.IrqOff)
		if d.wake == WakeEvery {
			arm = abi.IrqEvery
		}
		d.regs.Store(abi.EngineRegs(e)+abi.RegIrqArm, arm)
	}
	switch d.delivery {
	case IRQThreaded:
		d.irqThreads.Go(func() { d.irqThreadLoop(d.irqKick, d.signalAll) })
	case IRQWorkqueue:
		d.irqThreads.Go(func() { d.irqThreadLoop(d.irqKick, d.queueWork) })
		d.irqThreads.Go(func() { d.irqThreadLoop(d.irqWork, d.signalAll) })
	}
	d.dev.SetInterruptHandler(d.hardIRQ)
}

// stopIRQ disconnects the handler and stops the delivery goroutines. It runs
// in Close after the device has stopped, so no interrupt is in progress.
func (d *Driver) stopIRQ() {
	d.dev.SetInterruptHandler(nil)
	close(d.irqStop)
	d.irqThreads.Wait()
}

// ANCHOR: hardirq
// hardIRQ is the interrupt handler: it runs on engine e's goroutine each
// time e raises the line.
func (d *Driver) hardIRQ(e abi.Engine) {
	d.irqs.Add(1)
	switch d.delivery {
	case IRQDirect:
		d.timelines[e].signal()
	default:
		kick(d.irqKick)
	}
}

// ANCHOR_END: hardirq

// kick wakes the goroutine that receives from c, unless a kick is already
// pending; never blocks.
func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// irqThreadLoop runs work once per kick on c until stopIRQ.
func (d *Driver) irqThreadLoop(c chan struct{}, work func()) {
	for {
		select {
		case <-c:
			work()
		case <-d.irqStop:
			return
		}
	}
}

func (d *Driver) queueWork() { kick(d.irqWork) }

func (d *Driver) signalAll() {
	for e := range d.timelines {
		d.timelines[e].signal()
	}
}

// ANCHOR: signal
// signal wakes the waiters whose fences have signalled — or, untargeted,
// every waiter — and re-arms the interrupt for those that remain.
//
// No waiter is left asleep with its fence reached. Its fence was written
// either before this load of RegFence (then it is popped here), or after:
// then the engine, having stored that fence, loads the arm registers and
// finds either the target armed before this signal (no greater than the
// fence: an interrupt) or the one armed below (the least remaining target,
// at most this waiter's: an interrupt). The next interrupt serves it.
func (tl *timeline) signal() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	// This load pairs with the engine's store of RegFence.
	fence := tl.d.regs.Load(tl.bank + abi.RegFence)
	for len(tl.waiters) > 0 && (tl.d.wake == WakeEvery || abi.Reached(fence, tl.waiters[0].target)) {
		w := heap.Pop(&tl.waiters).(*waiter)
		w.wake <- struct{}{} // cannot block: buffered, and a waiter is woken once per add
	}
	tl.armLocked()
}

// ANCHOR_END: signal
