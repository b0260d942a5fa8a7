package server

import (
	"fmt"
	"slices"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// Priority is granted, not taken. A channel's priority decides whose
// commands an engine runs first, and a timeslice how long a channel may
// keep the engine from others of its priority: both are claims on every
// other client's share of the device. So a client may open channels at
// abi.PriorityNormal or below, with no timeslice (0: the scheduler's
// default), and needs the daemon's permission for anything more — as
// DRM asks CAP_SYS_NICE of a process that creates a high-priority context.
// The daemon grants it to root and to the uids of Config.PriorityUIDs
// (softgpud -priority-uids), by the credentials the kernel gave at
// connect (SO_PEERCRED), which the client cannot forge.
//
// The check sits here, at the boundary, and not in the scheduler: the
// driver and the engines serve whatever priority the daemon passes them,
// as the in-process stages do; only the daemon knows who asked.

// claimsPriority reports whether a CHANNEL_OPEN asks for more than every
// client may have.
func claimsPriority(a *uapi.ChannelOpen) bool {
	return a.Priority > abi.PriorityNormal || a.Timeslice != 0
}

// ANCHOR: grant

// grantPriority returns nil if the client may open the channel a asks
// for, or an error wrapping uapi.ErrPerm that says what was refused.
func (c *client) grantPriority(a *uapi.ChannelOpen) error {
	if !claimsPriority(a) || c.uid == 0 || slices.Contains(c.s.cfg.PriorityUIDs, c.uid) {
		return nil
	}
	return fmt.Errorf("priority %d, timeslice %d ns: uid %d may open channels at priority %d or below with no timeslice (softgpud -priority-uids grants more): %w",
		a.Priority, a.Timeslice, c.uid, abi.PriorityNormal, uapi.ErrPerm)
}

// ANCHOR_END: grant
