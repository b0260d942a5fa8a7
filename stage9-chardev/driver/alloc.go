package driver

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Allocator hands out device memory. It is a first-fit allocator over a list
// of free spans kept sorted by address and coalesced on free.
//
// Invariants (checked by checkLocked in tests):
//   - free spans are sorted, non-empty, and neither overlap nor touch (a
//     freed span merges with its neighbours);
//   - every live allocation lies inside [AllocBase, size) and overlaps no
//     free span and no other allocation;
//   - sum(free) + sum(live) = size - AllocBase.
type Allocator struct {
	size uint64 // device memory size; the heap is [AllocBase, size)

	// mu guards free and live. It is not the driver's global submission
	// lock: allocation is host bookkeeping and never touches the device.
	mu   sync.Mutex
	free []span            // sorted by addr
	live map[uint64]uint64 // addr → size of each allocation
}

type span struct{ addr, size uint64 }

const (
	// AllocAlign is the alignment of every allocation (and the granule its
	// size is rounded up to): every kernel's alignment rule is met, and
	// two allocations never share a cache line.
	AllocAlign = 256
	// AllocBase is the first address Alloc can return. The page below it is
	// never handed out, so a zero address is never a valid allocation.
	AllocBase = 4096
)

var (
	ErrOutOfMemory = errors.New("softgpu: out of device memory")
	ErrZeroSize    = errors.New("softgpu: allocation of zero bytes")
	ErrDoubleFree  = errors.New("softgpu: double free")
	ErrBadFree     = errors.New("softgpu: free of an address Alloc did not return")
)

// NewAllocator manages device memory of the given size.
func NewAllocator(size uint64) *Allocator {
	a := &Allocator{size: size, live: map[uint64]uint64{}}
	if size > AllocBase {
		a.free = []span{{AllocBase, size - AllocBase}}
	}
	return a
}

// Alloc returns the address of size bytes, rounded up to AllocAlign.
func (a *Allocator) Alloc(size uint64) (uint64, error) {
	if size == 0 {
		return 0, ErrZeroSize
	}
	rounded := (size + AllocAlign - 1) &^ (AllocAlign - 1)
	if rounded < size { // size within AllocAlign of 2^64
		return 0, fmt.Errorf("%w: %d bytes requested", ErrOutOfMemory, size)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.free {
		if s.size < rounded {
			continue
		}
		if s.size == rounded {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = span{s.addr + rounded, s.size - rounded}
		}
		a.live[s.addr] = rounded
		return s.addr, nil
	}
	var largest, total uint64
	for _, s := range a.free {
		largest = max(largest, s.size)
		total += s.size
	}
	return 0, fmt.Errorf("%w: %d bytes requested, %d free, largest free block %d", ErrOutOfMemory, size, total, largest)
}

// Free returns the allocation at addr. Freeing an address inside free memory
// is ErrDoubleFree (the allocator cannot tell a second free from a wild
// address that happens to land there); any other address Alloc did not return,
// such as a pointer into the middle of an allocation, is ErrBadFree.
func (a *Allocator) Free(addr uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	size, ok := a.live[addr]
	if !ok {
		if a.isFreeLocked(addr) {
			return fmt.Errorf("%w: address %#x", ErrDoubleFree, addr)
		}
		return fmt.Errorf("%w: address %#x", ErrBadFree, addr)
	}
	delete(a.live, addr)
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].addr > addr })
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = span{addr, size}
	// Merge with the right neighbour, then the left, so free spans never touch.
	if i+1 < len(a.free) && a.free[i].addr+a.free[i].size == a.free[i+1].addr {
		a.free[i].size += a.free[i+1].size
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].addr+a.free[i-1].size == a.free[i].addr {
		a.free[i-1].size += a.free[i].size
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	return nil
}

func (a *Allocator) isFreeLocked(addr uint64) bool {
	for _, s := range a.free {
		if addr >= s.addr && addr < s.addr+s.size {
			return true
		}
	}
	return false
}

// InUse reports the bytes currently allocated (after rounding).
func (a *Allocator) InUse() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n uint64
	for _, size := range a.live {
		n += size
	}
	return n
}
