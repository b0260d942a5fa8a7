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
// AllocAlign): the first fit from the bottom.
func (a *Allocator) AllocAligned(size, align uint64) (uint64, error) {
	return a.AllocAlignedFrom(size, align, 0)
}

// AllocAlignedFrom is AllocAligned, next-fit: it takes the first fit at or
// above from, and only if there is none, the first fit from the bottom.
// A caller that passes the end of its last allocation as from uses the
// range in order, and reuses a freed address only after going round.
func (a *Allocator) AllocAlignedFrom(size, align, from uint64) (uint64, error) {
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
	if start, ok := a.cutAlignedLocked(rounded, align, from); ok {
		return start, nil
	}
	if from != 0 { // went round: the first fit from the bottom
		if start, ok := a.cutAlignedLocked(rounded, align, 0); ok {
			return start, nil
		}
	}
	return 0, fmt.Errorf("%w: %d bytes aligned to %d requested", ErrOutOfMemory, size, align)
}

// cutAlignedLocked takes rounded bytes at the first address at or above
// from that is a multiple of align and lies in a free span with room.
func (a *Allocator) cutAlignedLocked(rounded, align, from uint64) (uint64, bool) {
	for i, s := range a.free {
		if s.addr+s.size <= from {
			continue
		}
		start := (max(s.addr, from) + align - 1) &^ (align - 1)
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
		return start, true
	}
	return 0, false
}
