package driver

import (
	"fmt"
	"math/bits"
)

// Virtual memory asks two things more of the allocator: a range that does
// not start at AllocBase (a context's virtual addresses, the page-table
// pool), and allocations aligned to a page size, so that a 2 MiB page can
// map them.

// NewRangeAllocator manages the addresses [base, end).
func NewRangeAllocator(base, end uint64) *Allocator {
	a := &Allocator{size: end, live: map[uint64]uint64{}}
	if end > base {
		a.free = []span{{base, end - base}}
	}
	return a
}

// AllocAligned returns the address of size bytes, rounded up to align, at
// an address that is a multiple of align (a power of two, at least
// AllocAlign).
func (a *Allocator) AllocAligned(size, align uint64) (uint64, error) {
	if size == 0 {
		return 0, ErrZeroSize
	}
	if align < AllocAlign || bits.OnesCount64(align) != 1 {
		return 0, fmt.Errorf("%w: alignment %d is not a power of two of at least %d", ErrConfig, align, AllocAlign)
	}
	rounded := (size + align - 1) &^ (align - 1)
	if rounded < size {
		return 0, fmt.Errorf("%w: %d bytes requested", ErrOutOfMemory, size)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.free {
		start := (s.addr + align - 1) &^ (align - 1)
		if start < s.addr || start-s.addr > s.size || s.size-(start-s.addr) < rounded {
			continue
		}
		// Cut [start, start+rounded) out of the span: what is left before
		// and after it stays free.
		before, after := span{s.addr, start - s.addr}, span{start + rounded, s.addr + s.size - start - rounded}
		var rest []span
		if before.size > 0 {
			rest = append(rest, before)
		}
		if after.size > 0 {
			rest = append(rest, after)
		}
		a.free = append(a.free[:i], append(rest, a.free[i+1:]...)...)
		a.live[start] = rounded
		return start, nil
	}
	return 0, fmt.Errorf("%w: %d bytes aligned to %d requested", ErrOutOfMemory, size, align)
}
