package driver

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkInvariants verifies the allocator's invariants (see Allocator).
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var freeBytes, liveBytes uint64
	for i, s := range a.free {
		if s.size == 0 {
			t.Fatalf("free span %d is empty", i)
		}
		if i > 0 && a.free[i-1].addr+a.free[i-1].size >= s.addr {
			t.Fatalf("free spans %d and %d overlap or touch: %+v %+v", i-1, i, a.free[i-1], s)
		}
		freeBytes += s.size
	}
	type iv struct{ lo, hi uint64 }
	var all []iv
	for addr, size := range a.live {
		if addr < AllocBase || addr+size > a.size || addr%AllocAlign != 0 {
			t.Fatalf("allocation [%#x, +%d) is outside the heap or misaligned", addr, size)
		}
		liveBytes += size
		all = append(all, iv{addr, addr + size})
	}
	for _, s := range a.free {
		all = append(all, iv{s.addr, s.addr + s.size})
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if all[i].lo < all[j].hi && all[j].lo < all[i].hi {
				t.Fatalf("ranges [%#x,%#x) and [%#x,%#x) overlap", all[i].lo, all[i].hi, all[j].lo, all[j].hi)
			}
		}
	}
	require.Equal(t, a.size-AllocBase, freeBytes+liveBytes, "free %d + live %d", freeBytes, liveBytes)
}

func TestAllocRandomNeverOverlaps(t *testing.T) {
	a := NewAllocator(1 << 20)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []uint64
	for i := range 2000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			require.NoError(t, a.Free(live[k]), "step %d: Free(%#x)", i, live[k])
			live = append(live[:k], live[k+1:]...)
		} else {
			addr, err := a.Alloc(uint64(1 + rng.IntN(20000)))
			if errors.Is(err, ErrOutOfMemory) {
				continue
			}
			require.NoError(t, err, "step %d: Alloc", i)
			live = append(live, addr)
		}
		if i%50 == 0 {
			checkInvariants(t, a)
		}
	}
	for _, addr := range live {
		require.NoError(t, a.Free(addr), "Free(%#x)", addr)
	}
	checkInvariants(t, a)
	if len(a.free) != 1 || a.InUse() != 0 {
		t.Errorf("after freeing everything: %d free spans, %d bytes in use; want 1 span, 0 bytes", len(a.free), a.InUse())
	}
}

func TestAllocExhaustion(t *testing.T) {
	const size = 64 << 10
	a := NewAllocator(size)
	addr, err := a.Alloc(size - AllocBase)
	require.NoError(t, err, "Alloc(all of the heap)")
	_, err = a.Alloc(1)
	assert.ErrorIs(t, err, ErrOutOfMemory, "Alloc(1) on a full heap")
	require.NoError(t, a.Free(addr))
	_, err = a.Alloc(size)
	assert.ErrorIs(t, err, ErrOutOfMemory, "Alloc(more than the heap)")
	_, err = a.Alloc(1<<64 - 1)
	assert.ErrorIs(t, err, ErrOutOfMemory, "Alloc(2^64-1)")
	checkInvariants(t, a)
}

func TestFreeErrors(t *testing.T) {
	a := NewAllocator(1 << 20)
	x, _ := a.Alloc(1000)
	y, _ := a.Alloc(1000)
	require.NoError(t, a.Free(x))
	tests := []struct {
		name string
		addr uint64
		want error
	}{
		{"double free", x, ErrDoubleFree},
		{"interior pointer", y + AllocAlign, ErrBadFree},
		{"wild address inside free memory reads as a double free", y + 1<<16, ErrDoubleFree},
		{"below the heap", 0, ErrBadFree},
	}
	for _, tt := range tests {
		assert.ErrorIs(t, a.Free(tt.addr), tt.want, "%s: Free(%#x)", tt.name, tt.addr)
	}
	_, err := a.Alloc(0)
	assert.ErrorIs(t, err, ErrZeroSize, "Alloc(0)")
	checkInvariants(t, a)
}

func TestAllocIsAlignedAndRounded(t *testing.T) {
	a := NewAllocator(1 << 20)
	p, _ := a.Alloc(1)
	q, _ := a.Alloc(1)
	if p%AllocAlign != 0 || q%AllocAlign != 0 || q-p != AllocAlign {
		t.Errorf("Alloc(1), Alloc(1) = %#x, %#x; want %d-aligned and %d apart", p, q, AllocAlign, AllocAlign)
	}
	if p < AllocBase {
		t.Errorf("first allocation %#x is below AllocBase %#x", p, AllocBase)
	}
}
