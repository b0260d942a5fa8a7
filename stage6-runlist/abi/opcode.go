package abi

import "fmt"

// Opcode selects what a command does. Zero is deliberately not an opcode: a
// slot of zero bytes is an invalid command, not a silent NOP.
type Opcode uint8

// Every opcode.
const (
	OpNop   Opcode = 0x01 // do nothing; completes at once
	OpFill  Opcode = 0x02 // memset: Size bytes at Dst to the byte Value
	OpCopy  Opcode = 0x03 // memmove: Size bytes from Src to Dst (ranges may overlap)
	OpDelay Opcode = 0x04 // keep the engine busy for Value cycles (a stand-in for a long shader)
	OpSpin  Opcode = 0x05 // a hung shader, for tests and debugging: busy for Value cycles with no preemption point (runlist.go)

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

// engineMask is a set of engines, one bit per Engine.
type engineMask uint8

const (
	onCompute engineMask = 1 << EngineCompute
	onCopy    engineMask = 1 << EngineCopy
	onBoth               = onCompute | onCopy
)

// opcodes is the one table of opcodes: its name, and which engines run it.
// Both engines run the housekeeping opcodes; copies belong to the copy engine
// and kernels to the compute engine, as on a real GPU. An opcode missing
// from this table is undefined.
var opcodes = map[Opcode]struct {
	name    string
	engines engineMask
}{
	OpNop:   {"NOP", onBoth},
	OpFill:  {"FILL", onBoth},
	OpCopy:  {"COPY", onCopy},
	OpDelay: {"DELAY", onBoth},
	OpSpin:  {"SPIN", onBoth},
	OpSum32: {"SUM32", onCompute},
	OpAdd32: {"ADD32", onCompute},
}

// runsOn is opcodes flattened into an array, built once: the engines consult
// it for every command, and an array index costs a nanosecond where a map
// lookup costs tens (~60 vs ~150 ns per command on the engine in a scratch
// run when this was written, in no record; MACHINE.md's hand probe puts a
// map lookup at 30-40 ns and a slice index at 1-13).
var runsOn = func() (t [256]engineMask) {
	for op, o := range opcodes {
		t[op] = o.engines
	}
	return t
}()

// Defined reports whether op is a defined opcode.
func (op Opcode) Defined() bool { return runsOn[op] != 0 }

// Supports reports whether engine e executes opcode op.
func (e Engine) Supports(op Opcode) bool {
	return e < NumEngines && runsOn[op]&(1<<e) != 0
}

func (op Opcode) String() string {
	if o, ok := opcodes[op]; ok {
		return o.name
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(op))
}

func (e Engine) String() string {
	switch e {
	case EngineCompute:
		return "compute"
	case EngineCopy:
		return "copy"
	}
	return fmt.Sprintf("engine(%d)", uint8(e))
}
