//go:build race

package mmio

import (
	"runtime"
	"unsafe"
)

// The race detector learns of an ordering from the atomics it sees, and
// it does not see atomics on memory outside the Go heap: a register space
// in an mmap — a shared device's, and a client's mapping of its pages — is
// such memory. Every Store to a register there still orders what its
// goroutine wrote before it, for a goroutine whose Load sees the value
// after; the detector would call those writes races. So, in race builds
// only, each register has a shadow word on the heap, and Store is a
// release and Load an acquire on it: the order the hardware gives, told
// to the detector.
const raceEnabled = true

func raceRelease(shadow *uint64) { runtime.RaceReleaseMerge(unsafe.Pointer(shadow)) }
func raceAcquire(shadow *uint64) { runtime.RaceAcquire(unsafe.Pointer(shadow)) }
