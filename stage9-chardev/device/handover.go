package device

import "softgpu/stage9-chardev/abi"

// A channel id that changes hands starts clean. The daemon hands one
// channel id to client after client, and everything the engine left in
// the channel's read-only pages — its fault, the value that faulted it,
// the fence timeline, when the last fence landed, how many interrupts it
// raised, the completion ring's entries — would otherwise reach the next
// owner: a completion entry at or above the head makes the next owner's
// command read as done before it ran; a fault makes a healthy channel
// read as dead; the counters tell one client how another's work went.
// The engine resets a channel it saw fault as it leaves its runlist
// (Engine.reset), but that is the engine's word, and a channel that
// left cleanly keeps its counters; so the device resets the pages itself
// whenever a shared channel goes back to private memory (privatise),
// whatever the engine did, to one state it chooses from the head alone:
//
//	RegChannelFault      FaultNone
//	RegChannelFaultValue 0
//	RegFence             head (a command's fence is its index + 1: every
//	                     command below the head has reached it, none above)
//	RegFenceCycles       0
//	RegIrqCount          0
//	completion ring      entry for index i in [head, head+size): i - size,
//	                     so Completed(entry, j) holds for every j < head
//	                     and for no j >= head — the state resetRing gives
//	                     a new device, moved to the head.
//
// The head is the engine's (d.chans[c].head); the caller has seen the
// channel leave its runlist (owner 0), which orders the last engine's
// writes of it before this read.

// ANCHOR: handover

// resetHandedOver puts channel c's status page and completion ring in
// the state above. c is on no runlist: no engine writes them meanwhile.
func (d *Device) resetHandedOver(c abi.Channel, head uint64) {
	status := abi.ChannelStatusPage(c)
	d.regs.Store(status+abi.RegChannelFault, uint64(abi.FaultNone))
	d.regs.Store(status+abi.RegChannelFaultValue, 0)
	d.regs.Store(status+abi.RegFence, head)
	d.regs.Store(status+abi.RegFenceCycles, 0)
	d.regs.Store(status+abi.RegIrqCount, 0)
	size := d.cfg.RingSize
	mask := size - 1
	for i := head; i != head+size; i++ {
		w := abi.CompletionWord(i, mask)
		d.completions[c][w].Store(i - size)
		for k := uint64(1); k < abi.CompletionWords; k++ {
			d.completions[c][w+k].Store(0)
		}
	}
}

// ANCHOR_END: handover
