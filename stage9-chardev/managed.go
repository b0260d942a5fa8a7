package softgpu

import "softgpu/stage9-chardev/driver"

// Managed memory: one allocation that the program and the device address
// by the same pointer, whose pages move to whichever side uses them.
//
//	ctx, _ := gpu.NewContext()
//	ch, _ := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{})
//	m, _ := ctx.AllocManaged(1 << 20)
//	copy(m.Bytes(), data)             // the host writes it: its pages are on the host
//	ch.Copy(dst, m.Ptr(), 1<<20)      // the device reads it: each first touch faults,
//	                                  // and the driver moves the page (and its neighbours)
//	m.Sync()                          // before the host reads what the device wrote
//
// The device's side needs nothing: its accesses fault, and the driver's
// fault handler migrates the pages and lets the command go on. The host's
// side needs Sync (or Prefetch to the host) before it reads pages the
// device wrote, or writes pages the device has: a Go program cannot trap
// its own accesses (see driver.Managed.Sync for why userfaultfd does not
// serve here).

// Managed is an allocation of managed memory.
type Managed struct{ m *driver.Managed }

// Location is where Prefetch moves pages: ToDevice or ToHost.
type Location = driver.Location

// The places pages can be prefetched to.
const (
	ToDevice = driver.ToDevice
	ToHost   = driver.ToHost
)

// Prefetch is the fault handler's prefetch policy (Config.Prefetch).
type Prefetch = driver.Prefetch

// The prefetch policies.
const (
	PrefetchWindow   = driver.PrefetchWindow   // the faulting page and its window (default 16 pages)
	PrefetchOff      = driver.PrefetchOff      // the faulting page alone
	PrefetchAdaptive = driver.PrefetchAdaptive // a window that doubles while faults are sequential
	PrefetchDensity  = driver.PrefetchDensity  // per 2 MiB block, the largest run around a fault that is mostly resident or faulting
)

// Eviction is how a block of managed pages is chosen to leave device
// memory when it is full (Config.Eviction).
type Eviction = driver.Eviction

// The eviction policies.
const (
	EvictClock = driver.EvictClock // second chance: a block an engine used since the hand passed stays
	EvictFIFO  = driver.EvictFIFO  // the block that came first leaves first
)

// Migration is a Prefetch in flight; Wait waits for it.
type Migration = driver.Migration

// ManagedStats counts faults, batches and migrations.
type ManagedStats = driver.ManagedStats

// AllocManaged allocates size bytes of managed memory in the context (not
// the default context, which maps device memory at its own addresses).
func (c *Context) AllocManaged(size uint64) (*Managed, error) {
	m, err := c.c.AllocManaged(size)
	if err != nil {
		return nil, err
	}
	return &Managed{m: m}, nil
}

// Ptr returns the allocation's address in its context.
func (m *Managed) Ptr() Ptr { return Ptr(m.m.VA()) }

// Bytes returns the program's view of the allocation. After Free it
// returns nil, as HostBuffer.Bytes does after HostFree: a late use is an
// index-out-of-range panic, and a slice taken before Free must not be
// touched, since the memory behind it is unmapped.
func (m *Managed) Bytes() []byte { return m.m.Bytes() }

// Size returns its size.
func (m *Managed) Size() uint64 { return m.m.Size() }

// Sync brings every page the device has back to the host. It is also a
// barrier for fault records: none made before it moves a page afterwards.
func (m *Managed) Sync() error { return m.m.Sync() }

// Prefetch moves [off, off+size) to the device or the host ahead of use,
// asynchronously.
func (m *Managed) Prefetch(off, size uint64, to Location) (*Migration, error) {
	return m.m.Prefetch(off, size, to)
}

// Free gives the allocation back.
func (m *Managed) Free() error { return m.m.Free() }

// Resident reports how many of its pages are on the device, and how many
// the thrashing guard has mapped remotely.
func (m *Managed) Resident() (device, remote int) { return m.m.Resident() }

// ManagedStats returns the fault handler's counts since Open.
func (g *GPU) ManagedStats() ManagedStats { return g.drv.ManagedStats() }
