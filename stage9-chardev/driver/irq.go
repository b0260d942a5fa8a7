package driver

import (
	"sync"
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/trace"
)

// This file is the driver's interrupt handling. The device raises its one
// line the way hardware does — it sets the cause in RegIrqCause (and, for
// a fence, the channel's bit in RegIrqChannels) and asserts the line,
// which here wakes the driver's interrupt thread — and goes back to its
// work. The interrupt thread plays the CPU taking the interrupt: it reads
// the causes, acknowledges them, and then does what the chosen delivery
// path says, after the three compared in seed 001's thread:
//
//	direct     the interrupt thread signals the waiters itself
//	threaded   it kicks a handler thread, which signals them
//	workqueue  it kicks a handler thread, which queues work for a worker,
//	           which signals them
//
// Each hop after the first is one more goroutine wake-up: the latency the
// FenceSignal benchmark compares. Kicks are non-blocking sends on
// channels of one, and a kick that finds one pending is merged with it:
// the channels to signal accumulate in a word the next hop takes whole.

// Delivery is the path from the interrupt to the waiters.
type Delivery int

const (
	IRQDirect Delivery = iota
	IRQThreaded
	IRQWorkqueue
)

// Defined reports whether d is a delivery path.
func (d Delivery) Defined() bool { return d >= IRQDirect && d <= IRQWorkqueue }

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

// Defined reports whether w is a wake policy.
func (w Wake) Defined() bool { return w == WakeTargeted || w == WakeEvery }

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
	IRQs          uint64 // times the interrupt thread took the line
	Wakeups       uint64 // times a blocked waiter was woken
	FutileWakeups uint64 // wake-ups whose fence had not signalled
	EngineWakes   uint64 // doorbells that found their engine asleep and woke it
	SleepTimeouts uint64 // a client's sleeps on a fence word that no wake ended (client.go)
}

// stats is Stats as the driver keeps it; channels share the driver's.
type stats struct {
	irqs, wakeups, futileWakeups atomic.Uint64
	engineWakes                  atomic.Uint64
	sleepTimeouts                atomic.Uint64
}

// Stats returns the interrupt counters.
func (d *Driver) Stats() Stats {
	return Stats{IRQs: d.stats.irqs.Load(), Wakeups: d.stats.wakeups.Load(), FutileWakeups: d.stats.futileWakeups.Load(),
		EngineWakes: d.stats.engineWakes.Load()}
}

// irq is the driver's interrupt machinery.
type irq struct {
	line    <-chan struct{}                    // the device's interrupt line, closed when the device stops
	pending [abi.IrqChannelWords]atomic.Uint64 // channels whose waiters the next hop should signal, as in RegIrqChannels
	kick    chan struct{}                      // the interrupt thread → the handler thread (threaded, workqueue)
	work    chan struct{}                      // the handler thread → the worker (workqueue)
	stop    chan struct{}                      // closed by the interrupt thread as it ends: stops the others
	threads sync.WaitGroup
}

// startIRQ starts the interrupt thread and the goroutines the delivery path
// needs. In the untargeted mode it also arms every channel for every
// interrupt, once and for all.
func (d *Driver) startIRQ() {
	d.irq.line = d.hw.Interrupts()
	d.irq.kick = make(chan struct{}, 1)
	d.irq.work = make(chan struct{}, 1)
	d.irq.stop = make(chan struct{})
	if d.wake == WakeEvery {
		for _, ch := range d.liveChannels() {
			d.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqEvery) // and newChannel arms every later one
		}
	}
	d.irq.threads.Go(d.interruptLoop)
	switch d.delivery {
	case IRQThreaded:
		d.irq.threads.Go(func() { d.irqThreadLoop(d.irq.kick, d.signalPending) })
	case IRQWorkqueue:
		d.irq.threads.Go(func() { d.irqThreadLoop(d.irq.kick, func() { kick(d.irq.work) }) })
		d.irq.threads.Go(func() { d.irqThreadLoop(d.irq.work, d.signalPending) })
	}
}

// awaitIRQ waits for the interrupt goroutines to end. Close calls it after
// the device has stopped: the device closes the line, the interrupt thread
// ends, and the others with it.
func (d *Driver) awaitIRQ() { d.irq.threads.Wait() }

// interruptLoop is the interrupt thread: it takes the line each time the
// device raises it, until the line is closed — the device stopped, or
// another driver took the line over.
func (d *Driver) interruptLoop() {
	defer close(d.irq.stop)
	defer d.um.stopOnce.Do(func() { close(d.um.stop) }) // no more faults will be raised: the handler can go (faults.go)
	for range d.irq.line {
		d.handleInterrupt()
	}
}

// ANCHOR: handle

// handleInterrupt reads what the device raised, acknowledges it, and
// delivers it. The acknowledgement comes before the work, as in any
// interrupt handler: a cause raised after the read stays set (the
// registers are write-one-to-clear) and comes with a new token, so it is
// handled on the next round; a fence written before the acknowledgement
// is seen by the signal below, which reads RegFence after it.
func (d *Driver) handleInterrupt() {
	var start uint64
	if d.trace != nil {
		start = d.Now()
	}
	cause := d.regs.Load(abi.RegIrqCause)
	d.regs.Store(abi.RegIrqCause, cause) // acknowledge: clears exactly these bits
	d.stats.irqs.Add(1)
	if cause&(abi.IrqCauseFence|abi.IrqCauseChannel) != 0 {
		for w := range abi.IrqChannelWords {
			off := abi.RegIrqChannels + 8*uint64(w)
			if channels := d.regs.Load(off); channels != 0 {
				d.regs.Store(off, channels)
				d.deliver(w, channels)
			}
		}
	}
	if cause&abi.IrqCauseChannel != 0 {
		for _, ch := range d.liveChannels() {
			// This load of RegChannelFault pairs with the engine's
			// store in fault, made before it raised the line.
			if ch.faultError() != nil {
				ch.timeline.wakeAll() // the rest of the channel will not run: every waiter settles
			}
		}
	}
	if cause&abi.IrqCauseFault != 0 {
		kick(d.um.kick) // faults.go: the handler reads the buffer
	}
	if cause&abi.IrqCauseStopped != 0 {
		for _, ch := range d.liveChannels() {
			ch.timeline.wakeAll()
		}
	}
	if d.trace != nil {
		d.trace.Record(trace.Event{Kind: trace.KindIRQHandled, Start: start, End: d.Now(), Arg: cause})
	}
}

// ANCHOR_END: handle

// deliver signals the waiters of the channels in the bit set channels of
// word w of RegIrqChannels, by the driver's delivery path.
func (d *Driver) deliver(w int, channels uint64) {
	if d.delivery == IRQDirect {
		d.signal(w, channels)
		return
	}
	d.irq.pending[w].Or(channels)
	kick(d.irq.kick)
}

// signalPending signals every channel queued for the next hop.
func (d *Driver) signalPending() {
	for w := range abi.IrqChannelWords {
		if channels := d.irq.pending[w].Swap(0); channels != 0 {
			d.signal(w, channels)
		}
	}
}

// signal signals the timelines of the channels in the bit set channels of
// word w.
func (d *Driver) signal(w int, channels uint64) {
	for bit := range abi.Channel(64) {
		c := abi.Channel(w)*64 + bit
		if channels&(1<<bit) != 0 {
			if ch := d.channels[c].Load(); ch != nil { // a channel closed since its fence was raised has no waiters
				ch.timeline.signal()
			}
		}
	}
}

// kick wakes the goroutine that receives from c, unless a kick is already
// pending; never blocks.
func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// irqThreadLoop runs work once per kick on c until the interrupt thread
// ends.
func (d *Driver) irqThreadLoop(c chan struct{}, work func()) {
	for {
		select {
		case <-c:
			work()
		case <-d.irq.stop:
			return
		}
	}
}
