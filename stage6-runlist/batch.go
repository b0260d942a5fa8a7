package softgpu

import (
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/driver"
)

// Asynchronous submission. A call here returns once its commands are in the
// channel's ring, before they run; the *Pending it returns is how the
// caller learns they have finished. Commands on one engine run in the order
// they were submitted; the two engines run independently of each other.
//
// A full ring makes the submitting call wait for room: nothing is dropped
// and nothing fails for lack of space.

// Pending is a submitted batch of commands. Wait returns when all of them
// have finished, with nil or an error naming each failed command; Err(i)
// gives command i's own result. Both may be called more than once, and from
// several goroutines.
type Pending = driver.Pending

// submitBatch places cmds on engine e's channel without waiting.
func (g *GPU) submitBatch(e Engine, cmds []abi.Command) (*Pending, error) {
	ch, err := g.channel(e)
	if err != nil {
		return nil, err
	}
	return ch.SubmitBatch(cmds)
}

// FillAsync submits a fill of size bytes at dst to value on the copy engine
// and returns without waiting for it.
func (g *GPU) FillAsync(dst Ptr, size uint64, value byte) (*Pending, error) {
	return g.submitBatch(Copy, []abi.Command{{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)}})
}

// CopyAsync submits a copy of size bytes from src to dst on the copy engine
// and returns without waiting for it.
func (g *GPU) CopyAsync(dst, src Ptr, size uint64) (*Pending, error) {
	return g.submitBatch(Copy, []abi.Command{{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size}})
}

// ANCHOR: batch

// Batch collects commands for one engine, to be submitted together: they go
// into the ring one after another and the doorbell is rung once for all of
// them (once per ring-full, for a batch larger than the free room). A bad
// command in a batch fails alone; the others run.
//
// A Batch is not safe for concurrent use. Submit empties it, so it can be
// reused for the next batch.
type Batch struct {
	g      *GPU
	engine Engine
	ctx    abi.Context     // the context its commands run in (context.go)
	ch     *driver.Channel // the channel it goes to (channel.go); nil: the engine's default channel
	cmds   []abi.Command
}

// NewBatch starts an empty batch for engine e.
func (g *GPU) NewBatch(e Engine) *Batch { return &Batch{g: g, engine: e} }

// Submit puts the batch's commands in the engine's ring and returns without
// waiting for them. The batch is empty afterwards.
func (b *Batch) Submit() (*Pending, error) {
	var p *Pending
	var err error
	if b.ch != nil {
		p, err = b.ch.SubmitBatch(b.cmds)
	} else {
		p, err = b.g.submitBatch(b.engine, b.cmds)
	}
	b.cmds = b.cmds[:0]
	return p, err
}

// ANCHOR_END: batch

// Len returns the number of commands in the batch so far.
func (b *Batch) Len() int { return len(b.cmds) }

// Fill adds a fill of size bytes at dst to value. (Both engines run fills.)
func (b *Batch) Fill(dst Ptr, size uint64, value byte) {
	b.add(abi.Command{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)})
}

// Copy adds a copy of size bytes from src to dst (copy engine only).
func (b *Batch) Copy(dst, src Ptr, size uint64) {
	b.add(abi.Command{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Sum32 adds the SUM32 kernel (compute engine only); see GPU.Sum32.
func (b *Batch) Sum32(dst, src Ptr, size uint64) {
	b.add(abi.Command{Op: abi.OpSum32, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Add32 adds the ADD32 kernel (compute engine only); see GPU.Add32.
func (b *Batch) Add32(dst Ptr, size uint64, addend uint32) {
	b.add(abi.Command{Op: abi.OpAdd32, Dst: uint64(dst), Size: size, Value: uint64(addend)})
}

// Nop adds a command that does nothing.
func (b *Batch) Nop() { b.add(abi.Command{Op: abi.OpNop}) }

// Delay adds a command that keeps the engine busy for the given cycles.
func (b *Batch) Delay(cycles uint64) { b.add(abi.Command{Op: abi.OpDelay, Value: cycles}) }

func (b *Batch) add(cmd abi.Command) {
	cmd.Ctx = b.ctx
	b.cmds = append(b.cmds, cmd)
}

// Doorbells reports how many times the driver has rung a doorbell since
// Open: once per synchronous call or batch that fit in its ring.
func (g *GPU) Doorbells() uint64 { return g.drv.Doorbells() }
