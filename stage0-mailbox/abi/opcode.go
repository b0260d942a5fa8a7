package abi

import "fmt"

// Opcode selects what a command does. Zero is deliberately not an opcode: a
// slot of zero bytes is an invalid command, not a silent NOP.
type Opcode uint8

// Every opcode of this stage. Which engine runs which is in Supports.
const (
	OpNop   Opcode = 0x01 // do nothing; completes at once
	OpFill  Opcode = 0x02 // memset: Size bytes at Dst to the byte Value
	OpCopy  Opcode = 0x03 // memmove: Size bytes from Src to Dst (ranges may overlap)
	OpDelay Opcode = 0x04 // keep the engine busy for Value cycles (a stand-in for a long shader)

	// Compute kernels: they work on little-endian uint32 words.
	OpSum32 Opcode = 0x10 // the uint64 sum of the Size/4 words at Src, stored at Dst
	OpAdd32 Opcode = 0x11 // add Value (mod 2^32) to each of the Size/4 words at Dst
)

// Engine names one of the device's two engines.
type Engine uint8

const (
	EngineCompute Engine = 0
	EngineCopy    Engine = 1
	NumEngines           = 2
)

func (e Engine) String() string {
	switch e {
	case EngineCompute:
		return "compute"
	case EngineCopy:
		return "copy"
	}
	return fmt.Sprintf("engine(%d)", uint8(e))
}

// Supports reports whether engine e executes opcode op. Both engines run the
// housekeeping opcodes; copies belong to the copy engine and kernels to the
// compute engine, as on a real GPU.
func (e Engine) Supports(op Opcode) bool {
	switch op {
	case OpNop, OpFill, OpDelay:
		return e < NumEngines
	case OpCopy:
		return e == EngineCopy
	case OpSum32, OpAdd32:
		return e == EngineCompute
	}
	return false
}

func (op Opcode) String() string {
	switch op {
	case OpNop:
		return "NOP"
	case OpFill:
		return "FILL"
	case OpCopy:
		return "COPY"
	case OpDelay:
		return "DELAY"
	case OpSum32:
		return "SUM32"
	case OpAdd32:
		return "ADD32"
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(op))
}
