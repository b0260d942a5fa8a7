package abi

// Register offsets. Registers are 64-bit words, read and written atomically,
// at byte offsets in the device's register space. A word written by the
// driver and a word written by the device never share a 64-byte cache line:
// each line has exactly one writer, so polling one side never steals the
// line the other side is writing.

// Global registers.
const (
	RegID       = 0x000 // device: the constant DeviceID
	RegMemSize  = 0x008 // device: bytes of device memory
	RegRingSize = 0x010 // device: slots in each engine's command ring, a power of two
)

// DeviceID is what RegID reads: the bytes "softgpu\x00", big-endian.
const DeviceID = 0x736f667467707500

// ANCHOR: ringregs
// Per-engine registers, at EngineRegs(e) + offset. In stage 1 each engine
// has a command ring (host-visible memory, not registers; see ring.go) and
// two registers, one per side, that bound the commands in it. Both carry
// free-running 64-bit ring indices, never slot numbers.
const (
	EngineRegStride = 0x1000

	// RegDoorbell is written by the driver: the ring's tail, one past the
	// index of the last command it has placed in the ring. Storing a new
	// tail is ringing the doorbell. Its own cache line.
	RegDoorbell = 0x000
	// RegHead is written by the engine: the index of the next command it
	// will run, so every command below it has completed and has its status
	// in the status array. Its own cache line.
	RegHead = 0x040
)

// ANCHOR_END: ringregs

// EngineRegs returns the base offset of engine e's register bank.
func EngineRegs(e Engine) uint64 { return EngineRegStride * uint64(1+e) }

// RegSpaceSize is the size of the whole register space in bytes: the
// global registers, the engines' banks and the DMA window (see dma.go).
const RegSpaceSize = WindowRegsBase + WindowSlots*WindowRegStride
