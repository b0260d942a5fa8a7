package softgpu

import (
	"fmt"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
)

// Channels. Each engine serves many channels and schedules them: a channel
// has its own ring, doorbell and fence timeline, a priority and a
// timeslice, and belongs to a context, whose address space its commands
// run in. The GPU's own methods use each engine's default channel; a
// program that wants its work scheduled apart — a latency-sensitive stream
// beside a bulk one, say — opens channels of its own:
//
//	bulk, _ := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityNormal})
//	urgent, _ := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityHigh})
//	bulk.CopyAsync(dst, src, 64<<20)  // runs in 64 KiB chunks…
//	urgent.Fill(flag, 64, 1)          // …and this runs at the next chunk boundary
//
// A higher-priority channel with work preempts a lower one at its next
// chunk boundary (about 3 µs of copying); channels of equal priority take
// turns when one's timeslice runs out while another waits; a channel that
// has waited a millisecond runs whatever its priority, so none starves.

// Priority orders channels: a channel of higher priority with work runs
// first.
type Priority uint8

// The priorities, lowest first.
const (
	PriorityLow      Priority = abi.PriorityLow
	PriorityNormal   Priority = abi.PriorityNormal
	PriorityHigh     Priority = abi.PriorityHigh
	PriorityRealtime Priority = abi.MaxPriority
)

// ChannelOptions says how an engine serves a channel.
type ChannelOptions struct {
	// Priority; the zero value is PriorityLow.
	Priority Priority
	// Timeslice is how long the channel may keep the engine while another
	// channel of its priority has work; zero means no slice: it keeps the
	// engine until its ring is empty (or a higher priority preempts it).
	Timeslice time.Duration
}

// Channel is a channel of one engine, in one context.
type Channel struct {
	g      *GPU
	ch     *driver.Channel
	engine Engine
}

// NewChannel opens a channel on engine e whose commands run in the
// context.
func (c *Context) NewChannel(e Engine, opts ChannelOptions) (*Channel, error) {
	if opts.Timeslice < 0 {
		return nil, fmt.Errorf("%w: Timeslice %v is negative", ErrConfig, opts.Timeslice)
	}
	ch, err := c.g.drv.NewChannel(e, c.c, driver.ChannelOptions{Priority: uint8(opts.Priority), Timeslice: uint64(opts.Timeslice)})
	if err != nil {
		return nil, err
	}
	return &Channel{g: c.g, ch: ch, engine: e}, nil
}

// NewChannel opens a channel on engine e in the default context.
func (g *GPU) NewChannel(e Engine, opts ChannelOptions) (*Channel, error) {
	return g.DefaultContext().NewChannel(e, opts)
}

// Close takes the channel off its engine. A command submitted before and
// not yet run fails with StatusRemoved; later calls fail with ErrClosed.
func (ch *Channel) Close() error { return ch.ch.Close() }

// Engine returns the engine that serves the channel.
func (ch *Channel) Engine() Engine { return ch.engine }

// Fill sets size bytes at dst to value, and waits.
func (ch *Channel) Fill(dst Ptr, size uint64, value byte) error {
	return ch.ch.Submit(abi.Command{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)})
}

// Copy copies size bytes from src to dst (copy engine), and waits.
func (ch *Channel) Copy(dst, src Ptr, size uint64) error {
	return ch.ch.Submit(abi.Command{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Sum32 runs the SUM32 kernel (compute engine; see GPU.Sum32), and waits.
func (ch *Channel) Sum32(dst, src Ptr, size uint64) error {
	return ch.ch.Submit(abi.Command{Op: abi.OpSum32, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Add32 runs the ADD32 kernel (compute engine; see GPU.Add32), and waits.
func (ch *Channel) Add32(dst Ptr, size uint64, addend uint32) error {
	return ch.ch.Submit(abi.Command{Op: abi.OpAdd32, Dst: uint64(dst), Size: size, Value: uint64(addend)})
}

// Nop runs a command that does nothing, and waits.
func (ch *Channel) Nop() error { return ch.ch.Submit(abi.Command{Op: abi.OpNop}) }

// Delay keeps the engine busy for the given cycles, and waits.
func (ch *Channel) Delay(cycles uint64) error {
	return ch.ch.Submit(abi.Command{Op: abi.OpDelay, Value: cycles})
}

// FillAsync submits a fill and returns without waiting for it.
func (ch *Channel) FillAsync(dst Ptr, size uint64, value byte) (*Pending, error) {
	return ch.ch.SubmitBatch([]abi.Command{{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)}})
}

// CopyAsync submits a copy and returns without waiting for it.
func (ch *Channel) CopyAsync(dst, src Ptr, size uint64) (*Pending, error) {
	return ch.ch.SubmitBatch([]abi.Command{{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size}})
}

// NewBatch starts an empty batch for the channel.
func (ch *Channel) NewBatch() *Batch { return &Batch{g: ch.g, engine: ch.engine, ch: ch.ch} }

// SchedStats counts what the engines' schedulers did since Open:
// preemptions, channel switches, watchdog timeouts.
type SchedStats = driver.SchedStats

// SchedStats returns the schedulers' counters.
func (g *GPU) SchedStats() SchedStats { return g.drv.SchedStats() }

// AttachChannel wraps a channel that a client of softgpud attached in
// its own process (package client): the same Channel, with every method,
// over memory the daemon shared. A program does not call it; the client
// library's NewChannel does.
func AttachChannel(ch *driver.Channel, e Engine) *Channel { return &Channel{ch: ch, engine: e} }
