package softgpu

import (
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/driver"
)

// Contexts. Every address is a virtual address in some context's address
// space, translated by the engines' MMU through page tables in device
// memory. The GPU's own methods (Alloc, Fill, Write and the rest) work in
// the default context, which maps device memory and pinned host memory at
// the addresses Alloc and HostBuffer.Ptr return. NewContext makes another
// address space, in which only what is allocated or mapped in it exists: a
// command in it cannot reach any other context's memory.
//
//	ctx, _ := gpu.NewContext()
//	p, _ := ctx.Alloc(1 << 20)       // device memory, at a VA of ctx
//	ctx.Fill(p, 1<<20, 7)
//	ctx.Fill(p+1<<20, 64, 7)         // past the end: a fault, and ctx stops
//	err := ctx.Err()                 // *FaultError: where, and what
//	ctx.ClearFault()                 // its commands run again
//
// A context that faults stops: its later commands fail with
// StatusCtxFaulted until ClearFault, as a GPU context does after an MMU
// fault. The default context does not: a bad address fails that command
// alone, as it always did.

// PageSize is the size of the pages a mapping uses: Page4K, Page64K or
// Page2M (zero: the largest the size allows).
type PageSize = abi.PageSize

// The page sizes a context maps with.
const (
	Page4K  = abi.Page4K
	Page64K = abi.Page64K
	Page2M  = abi.Page2M
)

// Walker is how the engines' MMU learns that pages continue one another
// (device/walker.go): from the fragment field the driver writes into each
// small page's entry (WalkerFragment, the default), by reading the
// following entries on every TLB fill (WalkerScan, which no MMU could
// afford; kept to compare), or not at all (WalkerNone: one TLB entry per
// page).
type Walker = device.Walker

// The walkers.
const (
	WalkerFragment = device.WalkerFragment
	WalkerScan     = device.WalkerScan
	WalkerNone     = device.WalkerNone
)

// FaultError is a context's fault: its VA and kind. errors.Is(err,
// ErrContextFaulted) is true of it.
type FaultError = driver.FaultError

// Context is an address space.
type Context struct {
	g *GPU
	c *driver.Context
}

// NewContext makes an address space with nothing mapped in it.
func (g *GPU) NewContext() (*Context, error) {
	c, err := g.drv.NewContext()
	if err != nil {
		return nil, err
	}
	return &Context{g: g, c: c}, nil
}

// DefaultContext returns the context the GPU's own methods work in.
func (g *GPU) DefaultContext() *Context { return &Context{g: g, c: g.drv.DefaultContext()} }

// Close unmaps everything, frees what the context allocated, and gives its
// id back. The default context cannot be closed.
func (c *Context) Close() error { return c.c.Close() }

// Alloc reserves size bytes of device memory and maps them in the context,
// with the largest pages the size allows.
func (c *Context) Alloc(size uint64) (Ptr, error) { return c.AllocPages(size, 0) }

// AllocPages is Alloc with the page size chosen (Page4K, Page64K or
// Page2M).
func (c *Context) AllocPages(size uint64, page PageSize) (Ptr, error) {
	va, err := c.c.Alloc(size, page)
	return Ptr(va), err
}

// Free unmaps and frees memory from Alloc; it returns once no engine can
// reach it.
func (c *Context) Free(p Ptr) error { return c.c.Unmap(uint64(p)) }

// Map maps pinned host memory into the context, with pages up to the given
// size (zero: the largest it allows), and returns its VA there. HostFree
// unmaps it from every context.
func (c *Context) Map(h *HostBuffer, page PageSize) (Ptr, error) {
	if h == nil {
		return 0, ErrBadHostFree
	}
	va, err := c.c.Map(h.p, page)
	return Ptr(va), err
}

// Unmap takes a mapping from Map out of the context; it returns once no
// engine can reach it through the context.
func (c *Context) Unmap(p Ptr) error { return c.c.Unmap(uint64(p)) }

// Err returns the context's fault, a *FaultError, if it has faulted since
// it was made or last cleared; nil otherwise.
func (c *Context) Err() error { return c.c.Err() }

// ClearFault acknowledges the context's faults, so its commands run again.
func (c *Context) ClearFault() { c.c.ClearFault() }

// submit runs cmd in the context on engine e and waits for it.
func (c *Context) submit(e Engine, cmd abi.Command) error {
	cmd.Ctx = c.c.ID()
	return c.g.submit(e, cmd)
}

// Fill sets size bytes at dst to value, on the copy engine.
func (c *Context) Fill(dst Ptr, size uint64, value byte) error {
	return c.submit(Copy, abi.Command{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)})
}

// Copy copies size bytes from src to dst, on the copy engine.
func (c *Context) Copy(dst, src Ptr, size uint64) error {
	return c.submit(Copy, abi.Command{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Sum32 runs the SUM32 kernel in the context; see GPU.Sum32.
func (c *Context) Sum32(dst, src Ptr, size uint64) error {
	return c.submit(Compute, abi.Command{Op: abi.OpSum32, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Add32 runs the ADD32 kernel in the context; see GPU.Add32.
func (c *Context) Add32(dst Ptr, size uint64, addend uint32) error {
	return c.submit(Compute, abi.Command{Op: abi.OpAdd32, Dst: uint64(dst), Size: size, Value: uint64(addend)})
}

// NewBatch starts an empty batch of commands in the context for engine e.
func (c *Context) NewBatch(e Engine) *Batch { return &Batch{g: c.g, engine: e, ctx: c.c.ID()} }

// TLBStats counts what the engines' TLBs did since Open.
type TLBStats = driver.TLBStats

// TLBStats returns the engines' TLB counters, summed.
func (g *GPU) TLBStats() TLBStats { return g.drv.TLBStats() }
