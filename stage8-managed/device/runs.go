package device

import "softgpu/stage8-managed/abi"

// access is what a command does with an operand: reads it, or writes it.
type access bool

const (
	reading access = false
	writing access = true
)

// ANCHOR: run

// run resolves the first run of the range [addr, addr+size), which the
// command reads or writes (acc): the longest piece of contiguous memory that
// starts at addr, at most size bytes, and at least one unless size is 0 (a
// zero-length operand still names an address, which must be valid). Every
// operand of every command is resolved here, and only here: this is where an
// address becomes memory.
//
// An address is a virtual address in the command's context: the MMU
// translates the run's pages (mmu.go) into a physical range — device memory,
// or a bus address that names pinned host memory through the DMA window
// (dma.go) — as long as they follow each other physically, and that range
// is the run. A translation fault stops the command there; the runs before
// it have been moved. The caller has checked that addr+size does not wrap.
func (e *Engine) run(addr, size uint64, acc access) ([]byte, abi.Status) {
	if size == 0 {
		return nil, e.emptyRun(addr, acc)
	}
	pa, n, host, st := e.translate(addr, size, acc)
	if st != abi.StatusOK {
		return nil, st
	}
	b, st := e.physRunAt(addr, pa, n, host, acc)
	if h := e.dev.hooks.Load(); h != nil && h.Resolved != nil && st == abi.StatusOK {
		h.Resolved(e.id, addr, bool(acc)) // hooks.go
	}
	return b, st
}

// ANCHOR_END: run

// runBefore resolves the last run of the range [end-size, end): the longest
// piece of contiguous memory that ends at end, at most size bytes.
// copyRunsDown walks an operand with it from the top.
func (e *Engine) runBefore(end, size uint64, acc access) ([]byte, abi.Status) {
	if size == 0 {
		return nil, e.emptyRun(end, acc)
	}
	pa, n, host, st := e.translateBack(end, size, acc)
	if st != abi.StatusOK {
		return nil, st
	}
	return e.physRunAt(end-n, pa, n, host, acc)
}

// physRunAt is physRun for the run a translation of va found: a device range
// outside device memory is a page entry naming memory the device does not
// have — malformed, and a fault of the context at va like any other.
func (e *Engine) physRunAt(va, pa, n uint64, host bool, acc access) ([]byte, abi.Status) {
	b, st := e.physRun(pa, n, host)
	if st == abi.StatusBadEntry {
		return nil, e.pageFault(va, abi.FaultMalformed, acc)
	}
	return b, st
}

// physRun returns the memory of the physical range [pa, pa+n): device
// memory, or, for the host aperture, pinned host memory through the DMA
// window. A device range outside device memory can only come from a page
// entry that names memory the device does not have: a malformed entry.
func (e *Engine) physRun(pa, n uint64, host bool) ([]byte, abi.Status) {
	if host {
		return e.busRun(pa, n)
	}
	mem := e.dev.mem
	if pa > uint64(len(mem)) || n > uint64(len(mem))-pa {
		return nil, abi.StatusBadEntry
	}
	return mem[pa : pa+n : pa+n], abi.StatusOK
}

// emptyRun checks a zero-length operand at VA addr: valid if addr is mapped,
// or if addr-1 is (it sits at the end of a mapping), as a zero-length range
// at the end of memory always was — and if the physical address it maps to
// is one too (an empty bus range must still start inside a window entry).
func (e *Engine) emptyRun(addr uint64, acc access) abi.Status {
	if t, f := e.lookup(addr, acc); f == 0 {
		_, st := e.physRun(t.pa+addr&(1<<t.shift-1), 0, t.host)
		return st
	}
	if addr > 0 {
		if t, f := e.lookup(addr-1, acc); f == 0 {
			_, st := e.physRun(t.pa+(addr-1)&(1<<t.shift-1)+1, 0, t.host)
			return st
		}
	}
	_, _, _, st := e.translate(addr, 1, acc) // records the fault
	return st
}
