package server

import "softgpu/stage9-chardev/driver"

// ManagedStats is the daemon's driver's managed-memory counts, for the
// pager's tests: whether host faults reached it, and how many moved a
// page.
func (s *Server) ManagedStats() driver.ManagedStats { return s.drv.ManagedStats() }

// PagerOutside is how many fault messages pagers left unanswered because
// their address was outside the allocation.
func PagerOutside() uint64 { return pagerOutside.Load() }
