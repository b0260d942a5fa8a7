package device

import "time"

// Clock is the device clock. It ticks at 1 GHz, so one cycle is one
// nanosecond of the host's monotonic clock since the device was opened. DELAY
// counts in these cycles, as any budget of the device does, so a figure in
// cycles reads directly as nanoseconds. The driver reads it as
// abi.RegTimestamp.
type Clock struct {
	start time.Time // carries Go's monotonic reading; never compared as wall time
}

func newClock() *Clock { return &Clock{start: time.Now()} }

// Now returns the cycles elapsed since the device was opened.
func (c *Clock) Now() uint64 { return uint64(time.Since(c.start)) }
