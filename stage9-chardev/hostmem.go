package softgpu

import "softgpu/stage9-chardev/driver"

// Pinned host memory. HostAlloc returns memory the copy engine can reach
// by itself: locked in RAM and registered with the device's DMA window
// under a bus address. A command names it by that address, like device
// memory:
//
//	buf, _ := gpu.HostAlloc(1 << 20)
//	copy(buf.Bytes(), data)                 // the host writes it as usual
//	gpu.Copy(devPtr, buf.Ptr(), 1<<20)      // the engine reads it: no CPU copy
//
// Write and Read notice a slice that lies in pinned memory and copy it the
// same way, with one command; any other slice goes through the driver's
// bounce buffers, a chunk at a time.

// HostBuffer is a region of pinned host memory.
type HostBuffer struct{ p *driver.Pinned }

// HostAlloc returns size bytes of pinned host memory, zeroed. It fails with
// ErrPinLimit (and a message saying what to raise) when the process
// may not lock that much more memory.
func (g *GPU) HostAlloc(size uint64) (*HostBuffer, error) {
	p, err := g.drv.HostAlloc(size)
	if err != nil {
		return nil, err
	}
	return &HostBuffer{p}, nil
}

// HostFree releases memory returned by HostAlloc. It waits for any command
// that is copying into or out of it at that moment to finish; a command that
// names it afterwards fails with StatusNoDMA — even one queued before the
// free, since its bus address is not reused until such commands have run.
// The slice Bytes returned must not be touched after HostFree.
func (g *GPU) HostFree(h *HostBuffer) error {
	if h == nil {
		return ErrBadHostFree
	}
	return g.drv.HostFree(h.p)
}

// Bytes returns the memory, for the host to read and write.
func (h *HostBuffer) Bytes() []byte { return h.p.Bytes() }

// Ptr returns the memory's bus address, which Copy, CopyAsync, Fill, the
// batch calls and the kernels accept wherever they take a device address:
// Ptr()+n is byte n.
func (h *HostBuffer) Ptr() Ptr { return Ptr(h.p.Bus()) }
