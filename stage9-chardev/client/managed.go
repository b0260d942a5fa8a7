package client

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

// Managed is managed memory (driver/managed.go) served across the
// boundary: one allocation the program and the device address by the same
// pointer, whose pages move to whichever side uses them. Its host side is a memfd
// the client made and the daemon adopted (MANAGED_ALLOC): Bytes is the
// client's mapping of it, the very pages the daemon's fault handler moves
// to and from device memory. The daemon is its pager (pager.go, since
// 2.2), and the host touches Bytes with no Sync; where it cannot be
// (ErrNoPager), as in-process, the host must Sync before it reads what
// the device wrote (Paged says which).
type Managed struct {
	g       *GPU
	va      uint64
	size    uint64
	mapping []byte

	uffd         int  // the userfaultfd the daemon pages it through, or -1 (pager.go)
	live         int  // with uffd, the client's end of its liveness socket pair, armed
	userModeOnly bool // uffd was made UFFD_USER_MODE_ONLY
}

// Location is where Prefetch moves pages: ToDevice or ToHost.
type Location = uint32

// The places Prefetch moves pages to (driver.ToDevice, driver.ToHost).
const (
	ToDevice Location = 1
	ToHost   Location = 2
)

// AllocManaged allocates size bytes of managed memory in the client's
// context: every page starts on the host, zeroed.
func (g *GPU) AllocManaged(size uint64) (*Managed, error) {
	if size == 0 {
		return nil, fmt.Errorf("%w: AllocManaged of 0 bytes", uapi.ErrInval)
	}
	length := roundPage(size)
	fd, mapping, err := sealedMemfd("softgpu-managed", length)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	a := uapi.ManagedAlloc{Size: size, Length: length}
	if _, err := g.call(&a, []int{fd}); err != nil {
		unix.Munmap(mapping)
		return nil, g.err(err)
	}
	m := &Managed{g: g, va: a.VA, size: size, mapping: mapping, uffd: -1}
	if err := m.startPager(); err != nil && !errors.Is(err, ErrNoPager) {
		m.Free()
		return nil, err
	}
	return m, nil
}

// Ptr returns the allocation's address, for commands.
func (m *Managed) Ptr() Ptr { return Ptr(m.va) }

// Bytes returns the host side: if Paged, simply memory; if not, read it
// after Sync.
func (m *Managed) Bytes() []byte { return m.mapping[:m.size] }

// Size returns the allocation's size.
func (m *Managed) Size() uint64 { return m.size }

// Sync brings every page back to the host (MANAGED_SYNC).
func (m *Managed) Sync() error {
	_, err := m.g.call(&uapi.ManagedSync{VA: m.va}, nil)
	return m.g.err(err)
}

// Migration is a Prefetch under way.
type Migration struct{ done chan error }

// Wait waits for the pages to have moved.
func (mg *Migration) Wait() error { return <-mg.done }

// Prefetch moves the pages of [off, off+size) to, ahead of their use; the
// daemon moves them while the call is out (MANAGED_PREFETCH), and Wait
// waits for its answer.
func (m *Managed) Prefetch(off, size uint64, to Location) (*Migration, error) {
	if off > m.size || size > m.size-off {
		return nil, fmt.Errorf("%w: Prefetch of [%d, +%d) in %d bytes", uapi.ErrInval, off, size, m.size)
	}
	mg := &Migration{done: make(chan error, 1)}
	go func() {
		_, err := m.g.call(&uapi.ManagedPrefetch{VA: m.va, Offset: off, Size: size, To: to}, nil)
		mg.done <- m.g.err(err)
	}()
	return mg, nil
}

// Resident returns how many pages are in device memory, and how many the
// device reaches on the host.
func (m *Managed) Resident() (device, remote int) {
	r := uapi.ManagedResident{VA: m.va}
	if _, err := m.g.call(&r, nil); err != nil {
		return 0, 0
	}
	return int(r.Device), int(r.Remote)
}

// Free gives the allocation back; Bytes must not be touched after it.
func (m *Managed) Free() error {
	m.disarmPager() // pager.go: the daemon closes its end as it frees
	_, err := m.g.call(&uapi.ManagedFree{VA: m.va}, nil)
	if m.mapping != nil {
		unix.Munmap(m.mapping)
		m.mapping = nil
	}
	m.stopPager()
	return m.g.err(err)
}

// sealedMemfd creates a memfd of length bytes, sealed against changing
// size, and maps it: the host memory a client shares with the daemon.
func sealedMemfd(name string, length uint64) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("softgpu: memfd_create: %w", err)
	}
	fail := func(what string, err error) (int, []byte, error) {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("softgpu: %s a memfd: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(length)); err != nil {
		return fail("sizing", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		return fail("sealing", err)
	}
	mapping, err := unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mapping", err)
	}
	return fd, mapping, nil
}
