package abi

// Register offsets. Registers are 64-bit words, read and written atomically,
// at byte offsets in the device's register space. A word written by the
// driver and a word written by the device never share a 64-byte cache line:
// each line has exactly one writer, so polling one side never steals the
// line the other side is writing.

// Global registers.
const (
	RegID      = 0x000 // device: the constant DeviceID
	RegMemSize = 0x008 // device: bytes of device memory
)

// DeviceID is what RegID reads: the bytes "softgpu\x00", big-endian.
const DeviceID = 0x736f667467707500

// ANCHOR: mailbox
// Per-engine registers, at EngineRegs(e) + offset. In stage 0 each engine
// has a mailbox: one command slot (host-visible memory, not a register), a
// doorbell the driver rings and a completion the engine publishes.
const (
	EngineRegStride = 0x1000

	// RegDoorbell is written by the driver: the sequence number of the
	// command it has just placed in the slot. Its own cache line.
	RegDoorbell = 0x000
	// RegCompletedSeq is written by the engine: the sequence number of the
	// last command it finished. Its own cache line, shared only with
	// RegCompletedStatus, which the same engine writes just before it.
	RegCompletedSeq    = 0x040
	RegCompletedStatus = 0x048
)

// ANCHOR_END: mailbox

// EngineRegs returns the base offset of engine e's register bank.
func EngineRegs(e Engine) uint64 { return EngineRegStride * uint64(1+e) }

// RegSpaceSize is the size of the whole register space in bytes.
const RegSpaceSize = EngineRegStride * (1 + NumEngines)
