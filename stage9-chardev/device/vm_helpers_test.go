package device

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
)

// The device's tests play the driver's part of virtual memory by hand: a
// test device gets tableArea bytes of device memory beyond the size it asks
// for, and context 0 maps, at the addresses they have physically, the data
// memory below that and the first 8 GiB of the bus range — the driver's own
// context does the same (driver/vm.go). The tables sit in the area above the
// data, which the context does not map, so no command can reach them and
// tests that pattern all of data(d) leave them alone.

// tableArea is the device memory each test device has for page tables
// (and, at its top, the scheduler tests' area: sched_test.go).
const tableArea = 512 << 10

// testContextSize is the engine context of a test device whose Config
// leaves it zero: small, so every channel's save area fits in the
// scheduler tests' area.
const testContextSize = 512

// data returns the memory a test's commands can reach: all of device
// memory but the table area.
func data(d *Device) []byte { return d.mem[:len(d.mem)-tableArea] }

// openVM opens a device with dataSize bytes of data memory, and context 0
// mapped over it (identityMap), closed when the test ends.
func openVM(t testing.TB, cfg Config) *Device {
	t.Helper()
	cfg.MemorySize += tableArea
	if cfg.ContextSize == 0 {
		cfg.ContextSize = testContextSize
	}
	d, err := Open(cfg)
	require.NoError(t, err, "Open(%+v)", cfg)
	identityMap(t, d)
	return d
}

// tables is a bump allocator of page tables in a test device's table area.
type tables struct {
	d    *Device
	next uint64
}

// alloc returns the PA of a fresh, zeroed table of n bytes.
func (tb *tables) alloc(t testing.TB, n uint64) uint64 {
	t.Helper()
	pa := tb.next
	if pa+n > uint64(len(tb.d.mem)) {
		t.Fatalf("the test's table area is full")
	}
	tb.next += n
	clear(tb.d.mem[pa : pa+n])
	return pa
}

// pteAt returns the PA of the entry for va at level in the table at table.
func pteAt(table, va uint64, level int) uint64 { return table + abi.LevelIndex(va, level)*8 }

func (tb *tables) read(pa uint64) abi.PTE { return abi.PTE(binary.LittleEndian.Uint64(tb.d.mem[pa:])) }
func (tb *tables) write(pa uint64, e abi.PTE) {
	binary.LittleEndian.PutUint64(tb.d.mem[pa:], uint64(e))
}

// mapPage maps the page of the given size at va to pa in the tables under
// root, making the tables on the way.
func (tb *tables) mapPage(t testing.TB, root, va, pa uint64, size abi.PageSize, writable, host bool) {
	t.Helper()
	leafLevel := map[abi.PageSize]int{abi.Page1G: 1, abi.Page2M: 2, abi.Page64K: 3, abi.Page4K: 3}[size]
	table := root
	for level := 0; level < leafLevel; level++ {
		pe := pteAt(table, va, level)
		if !tb.read(pe).Valid() {
			tb.write(pe, abi.MakeTable(tb.alloc(t, abi.TableBytes)))
		}
		table = tb.read(pe).Frame()
	}
	kind := map[abi.PageSize]uint64{abi.Page1G: abi.PTEPage1G, abi.Page2M: abi.PTEPage2M, abi.Page64K: abi.PTEPage64K, abi.Page4K: abi.PTEPage4K}[size]
	e := abi.MakePage(pa, kind, writable, host)
	if size == abi.Page64K {
		for i := range uint64(16) {
			tb.write(pteAt(table, va+i*4096, 3), e)
		}
		return
	}
	tb.write(pteAt(table, va, leafLevel), e)
}

// identityMap gives a test device's context 0 its tables: data memory and
// the first 8 GiB of the bus range at their physical addresses.
func identityMap(t testing.TB, d *Device) {
	t.Helper()
	dataSize := uint64(len(d.mem) - tableArea)
	tb := &tables{d: d, next: dataSize}
	root := tb.alloc(t, abi.RootBytes)
	for va := uint64(0); va < dataSize; va += 4096 {
		tb.mapPage(t, root, va, va, abi.Page4K, true, false)
	}
	for off := uint64(0); off < 8<<30; off += 1 << 30 {
		tb.mapPage(t, root, abi.BusBase+off, abi.BusBase+off, abi.Page1G, true, true)
	}
	r := abi.ContextRegs(0)
	d.regs.Store(r+abi.RegCtxRoot, root)
	d.regs.Store(r+abi.RegCtxFlags, abi.CtxEnabled)
}
