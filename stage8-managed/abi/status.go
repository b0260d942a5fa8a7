package abi

import "fmt"

// Status is what the engine reports for a completed command. A Status other
// than StatusOK is an error value, so the driver can wrap it and a caller can
// test for it with errors.Is(err, abi.StatusOutOfRange).
type Status uint32

const (
	StatusOK          Status = 0
	StatusBadOpcode   Status = 1  // the opcode is not defined
	StatusWrongEngine Status = 2  // the opcode is defined, but this engine does not run it
	StatusBadFlags    Status = 3  // a flag bit that is not defined is set
	StatusOutOfRange  Status = 4  // an address range leaves what the context maps, or address+size overflows
	StatusMisaligned  Status = 5  // an address or size breaks the opcode's alignment rule
	StatusAborted     Status = 6  // the device was closed while the command ran
	StatusReserved    Status = 7  // a reserved byte of the descriptor is not zero
	StatusNoDMA       Status = 8  // a bus address that no enabled DMA window entry maps to registered host memory
	StatusReadOnly    Status = 9  // a write to a page mapped read-only
	StatusBadEntry    Status = 10 // the page walk found an entry it cannot follow
	StatusBadContext  Status = 11 // the descriptor names a context that is not enabled
	StatusCtxFaulted  Status = 12 // the context has faulted and the driver has not cleared it
	StatusTimeout     Status = 13 // the watchdog stopped the command: it ran past RegWatchdog, or past RegPreemptTimeout after it was asked to give way
	StatusRemoved     Status = 14 // the channel left the runlist before the command ran
)

var statusText = [...]string{
	StatusOK:          "ok",
	StatusBadOpcode:   "bad opcode",
	StatusWrongEngine: "opcode not supported by this engine",
	StatusBadFlags:    "undefined flag bits",
	StatusOutOfRange:  "address out of range",
	StatusMisaligned:  "misaligned address or size",
	StatusAborted:     "aborted: device closed",
	StatusReserved:    "reserved bytes not zero",
	StatusNoDMA:       "bus address not mapped by the DMA window",
	StatusReadOnly:    "write to a read-only page",
	StatusBadEntry:    "malformed page-table entry",
	StatusBadContext:  "no such context",
	StatusCtxFaulted:  "context faulted earlier; cleared by the driver only",
	StatusTimeout:     "stopped by the watchdog",
	StatusRemoved:     "channel removed before the command ran",
}

func (s Status) String() string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return fmt.Sprintf("status(%d)", uint32(s))
}

// Error makes a non-OK status usable as an error.
func (s Status) Error() string { return "softgpu: " + s.String() }
