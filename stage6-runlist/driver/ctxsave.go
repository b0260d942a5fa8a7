package driver

import (
	"fmt"
	"sync/atomic"

	"softgpu/stage6-runlist/abi"
)

// Engine-context save areas, the driver's half (the engine's is in
// device/engctx.go). Each preemptible channel needs one: RegContextSize
// bytes of device memory where the engine writes its context when it
// preempts a command of the channel, and reads it back when it resumes
// it. The driver allocates it with the channel, names it in the channel's
// runlist entry (CtxSave), and frees it only after the engine has
// acknowledged a runlist without the channel: until then the engine may
// still write it.
//
// The areas come from the data memory Alloc hands out, as a real driver
// allocates a context's save buffers in VRAM beside the application's
// (AMD's CWSR area, NVIDIA's context-switch buffer). MemoryInUse leaves
// them out: it reports what the application has allocated.

// contextSaves counts the bytes of save areas allocated.
type contextSaves struct {
	size  uint64        // RegContextSize, read once at New
	inUse atomic.Uint64 // bytes allocated to save areas
}

// allocContextSave allocates a save area for a channel.
func (d *Driver) allocContextSave() (uint64, error) {
	pa, err := d.alloc.Alloc(d.ctxSaves.size) // AllocAlign-aligned: 64 is what the engine needs
	if err != nil {
		return 0, fmt.Errorf("a channel's %d-byte engine-context save area: %w", d.ctxSaves.size, err)
	}
	d.ctxSaves.inUse.Add(d.ctxSaves.size)
	return pa, nil
}

// freeContextSave frees a save area allocContextSave returned; the engine
// must be done with it (its channel on no runlist, acknowledged).
func (d *Driver) freeContextSave(pa uint64) {
	if err := d.alloc.Free(pa); err != nil {
		panic("driver: freeContextSave: " + err.Error())
	}
	d.ctxSaves.inUse.Add(-d.ctxSaves.size)
}

// initContextSaves reads the engines' context size and gives each
// engine's default channel its save area.
func (d *Driver) initContextSaves() error {
	d.ctxSaves.size = d.regs.Load(abi.RegContextSize)
	if d.ctxSaves.size == 0 || d.ctxSaves.size%64 != 0 {
		return fmt.Errorf("%w: RegContextSize %d is not a positive multiple of 64", ErrNoDevice, d.ctxSaves.size)
	}
	for e := range abi.Engine(abi.NumEngines) {
		ch := d.channels[abi.DefaultChannel(e)].Load()
		pa, err := d.allocContextSave()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNoDevice, err)
		}
		ch.ctxSave = pa
	}
	return nil
}
