package softgpu

import (
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
)

// The errors of this package, so that a caller can test for each with
// errors.Is without importing the driver. A command the device refused
// comes back as a *CommandError wrapping its status: errors.Is(err,
// softgpu.StatusOutOfRange) and the like.
var (
	ErrClosed         = driver.ErrClosed         // the GPU was closed, or its device stopped
	ErrConfig         = driver.ErrConfig         // a Config field is unusable; the message names it
	ErrNoEngine       = driver.ErrNoEngine       // an engine the device does not have
	ErrChannelFaulted = driver.ErrChannelFaulted // the device stopped serving a channel
	ErrOutOfMemory    = driver.ErrOutOfMemory    // Alloc could not find room
	ErrZeroSize       = driver.ErrZeroSize       // Alloc of zero bytes
	ErrDoubleFree     = driver.ErrDoubleFree     // Free of memory already free
	ErrBadFree        = driver.ErrBadFree        // Free of an address Alloc did not return
	ErrPinLimit       = driver.ErrPinLimit       // the kernel refused to pin host memory (RLIMIT_MEMLOCK)
	ErrNoWindow       = driver.ErrNoWindow       // every DMA window entry is taken or retiring
	ErrBadHostFree    = driver.ErrBadHostFree    // HostFree of a buffer that is not allocated
	ErrContext        = driver.ErrContext        // no context left, a closed one, a bad page size
	ErrManaged        = driver.ErrManaged        // a bad size or range of managed memory, or a double Free
	ErrContextFaulted = driver.ErrContextFaulted // a context faulted; its commands fail until ClearFault
	ErrRunlist        = driver.ErrRunlist        // the device refused a runlist, or a channel option is out of range
	ErrNoChannel      = driver.ErrNoChannel      // every channel is open, or a channel that cannot be closed
)

// CommandError is a command the device refused or could not finish.
type CommandError = driver.CommandError

// Status is what the device reports for a command; every status but
// StatusOK is an error.
type Status = abi.Status

// The statuses a CommandError can wrap.
const (
	StatusOK          = abi.StatusOK
	StatusBadOpcode   = abi.StatusBadOpcode
	StatusWrongEngine = abi.StatusWrongEngine
	StatusBadFlags    = abi.StatusBadFlags
	StatusOutOfRange  = abi.StatusOutOfRange
	StatusMisaligned  = abi.StatusMisaligned
	StatusAborted     = abi.StatusAborted
	StatusReserved    = abi.StatusReserved
	StatusNoDMA       = abi.StatusNoDMA
	StatusReadOnly    = abi.StatusReadOnly
	StatusBadEntry    = abi.StatusBadEntry
	StatusBadContext  = abi.StatusBadContext
	StatusCtxFaulted  = abi.StatusCtxFaulted
	StatusTimeout     = abi.StatusTimeout
	StatusRemoved     = abi.StatusRemoved
)
