package device

import "softgpu/stage1-ring/abi"

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
// address becomes memory, and so where page tables, if there were any, would
// translate.
//
// An address is an offset into device memory, and a range is one run or
// none: it must lie wholly inside device memory, or the command fails with
// StatusOutOfRange. The caller has checked that addr+size does not wrap.
func (e *Engine) run(addr, size uint64, acc access) ([]byte, abi.Status) {
	mem := e.dev.mem
	if addr > uint64(len(mem)) || size > uint64(len(mem))-addr {
		return nil, abi.StatusOutOfRange
	}
	end := addr + size
	return mem[addr:end:end], abi.StatusOK
}

// ANCHOR_END: run

// runBefore resolves the last run of the range [end-size, end): the longest
// piece of contiguous memory that ends at end, at most size bytes. copyRunsDown
// walks an operand with it from the top. Here, as for run, the range is one
// run.
func (e *Engine) runBefore(end, size uint64, acc access) ([]byte, abi.Status) {
	return e.run(end-size, size, acc)
}
