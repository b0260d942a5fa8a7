//go:build !race

package mmio

// Without the race detector there is nothing to tell (race_unsafe.go):
// the calls compile away.
const raceEnabled = false

func raceRelease(*uint64) {}
func raceAcquire(*uint64) {}
