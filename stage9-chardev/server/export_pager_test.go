package server

import "softgpu/stage9-chardev/driver"

// ManagedStats is the daemon's driver's managed-memory counts, for the
// pager's tests: whether host faults reached it, and how many moved a
// page.
func (s *Server) ManagedStats() driver.ManagedStats { return s.drv.ManagedStats() }

// PagerOutside is how many fault messages pagers left unanswered because
// their address was outside the allocation.
func PagerOutside() uint64 { return pagerOutside.Load() }

// ReplayFaults turns the pagers' duplicate-delivery hook on or off.
func ReplayFaults(on bool) { replayFaults.Store(on) }

// ServeFaultMessage has a pager for [base, base+length) with no
// allocation serve msg, and reports whether it was turned away before
// reaching the allocation (outside the range, or not a fault).
func ServeFaultMessage(base, length uint64, msg []byte) (turnedAway bool) {
	before := pagerOutside.Load()
	defer func() {
		if recover() != nil { // it reached for the allocation it does not have
			turnedAway = false
		}
	}()
	p := &pager{base: base, length: length}
	p.serve(msg)
	return pagerOutside.Load() > before || msg[0] != 0x12
}
