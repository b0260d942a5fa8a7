package abi

import "fmt"

// The register space. Registers are 64-bit words, read and written
// atomically, at byte offsets. The space is cut into 4 KiB pages, and every
// page belongs to one class:
//
//	PageReadOnly    written by the device only; the driver reads it, and a
//	                client of the device may map it read-only
//	PageUser        written by the driver's channel half: the doorbell page
//	                of one channel, which the client that owns the channel
//	                may map and write
//	PagePrivileged  written by the driver's device-wide half: control of
//	                the whole device, which no client may ever write
//
// and every 64-byte cache line has exactly one writer, so polling one side
// never steals the line the other side is writing. Table (below) lists every
// register with its offset, writer and class; registers_test.go checks those
// rules against it, so a new register that breaks one fails a test.
//
// The pages, in order:
//
//	0x0000  global           read-only   identity, clock, device state
//	0x1000  control          privileged  stop, interrupt cause
//	        engine e status  read-only   one page per engine
//	        channel c        user        the doorbell page, one per channel
//	        channel c status read-only   fault, fence timeline, one per channel
//	        DMA window       privileged  which host memory bus addresses name
//	        engine e control privileged  idle mode and budget, runlist, watchdog, preempt timeout; one per engine
//	        contexts         privileged  page-table roots, fault acknowledgements
//	        context status   read-only   faults

// RegPageSize is the size of one page of the register space.
const RegPageSize = 0x1000

// PageClass says who may write a page of the register space.
type PageClass uint8

const (
	PageReadOnly PageClass = iota + 1
	PageUser
	PagePrivileged
)

func (c PageClass) String() string {
	switch c {
	case PageReadOnly:
		return "read-only"
	case PageUser:
		return "user"
	case PagePrivileged:
		return "privileged"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Writer says which side stores a register.
type Writer uint8

const (
	WrittenByDevice Writer = iota + 1
	WrittenByDriver
	// SetByDevice registers are interrupt status: the device sets bits,
	// the driver clears them by writing ones (write-one-to-clear). Two
	// writers by design, on a line of their own that nobody polls.
	SetByDevice
)

func (w Writer) String() string {
	switch w {
	case WrittenByDevice:
		return "device"
	case SetByDevice:
		return "device (set), driver (cleared)"
	}
	return "driver"
}

// Register describes one register: the rows of the table.
type Register struct {
	Name   string
	Offset uint64 // byte offset in the register space
	Writer Writer
	Class  PageClass
}

// Global registers, in the read-only page at GlobalPage.
const (
	GlobalPage = 0x0000

	RegID       = GlobalPage + 0x000 // the constant DeviceID
	RegMemSize  = GlobalPage + 0x008 // bytes of device memory
	RegRingSize = GlobalPage + 0x010 // slots in each channel's ring, a power of two
	// RegContextSize is the bytes of engine context a preemption saves
	// and a resume restores (runlist.go): the size of the save area the
	// driver gives each preemptible channel.
	RegContextSize = GlobalPage + 0x018

	// RegTimestamp reads the device clock: cycles (ns) since the device
	// was opened. It is the one register whose value is not a stored
	// word; its own line.
	RegTimestamp = GlobalPage + 0x040

	// RegDeviceState is DeviceRunning until every engine has stopped
	// (after the driver stores ControlStop, or the device is closed),
	// then DeviceStopped for good. Its own line.
	RegDeviceState = GlobalPage + 0x080
)

// DeviceID is what RegID reads: the bytes "softgpu\x00", big-endian.
const DeviceID = 0x736f667467707500

// Values of RegDeviceState.
const (
	DeviceRunning = 0
	DeviceStopped = 1
)

// The control page: privileged, written by the driver.
const (
	ControlPage = 0x1000

	// RegControl: the driver stores ControlStop to stop every engine. An
	// engine finishes the command it is running (a DELAY is cut short
	// with StatusAborted), starts nothing new, and RegDeviceState reads
	// DeviceStopped once all have. There is no way back.
	RegControl = ControlPage + 0x000
)

// Values of RegControl.
const (
	ControlRun  = 0
	ControlStop = 1
)

// ANCHOR: enginebank

// Per-engine registers, in engine e's read-only status page at
// EngineStatusPage(e).
const (
	// RegEngineState is EngineRunning until the engine has stopped, then
	// EngineStopped.
	RegEngineState = 0x000
)

// ANCHOR_END: enginebank

// Values of RegEngineState (and EngineAsleep and EngineIdle, in idle.go).
const (
	EngineRunning = 0
	EngineStopped = 1
)

// ANCHOR: ringregs

// Per-channel registers. A channel is a ring: command slots and completion
// entries in host-visible memory (ring.go), and one register that bounds
// the commands in it. The doorbell carries a free-running 64-bit ring
// index, never a slot number.
//
// In the channel's user page, at DoorbellPage(c):
const (
	// RegDoorbell is written by the driver: the ring's tail, one past the
	// index of the last command it has placed in the ring. Storing a new
	// tail is ringing the doorbell. A tail that moves backwards, or runs
	// more than RingSize past the commands the engine has taken, faults
	// the channel (FaultDoorbell). Its own line.
	RegDoorbell = 0x000
)

// In the channel's read-only status page, at ChannelStatusPage(c):
const (
	// RegChannelFault is FaultNone while the channel is served, or why
	// the engine stopped serving it; RegChannelFaultValue is the value
	// that faulted it. Their own line, written once.
	RegChannelFault      = 0x040
	RegChannelFaultValue = 0x048
)

// ANCHOR_END: ringregs

// The banks of per-engine and per-channel pages follow the two global ones.
const (
	engineStatusBase  = 0x2000
	channelBanksBase  = engineStatusBase + NumEngines*RegPageSize
	channelBankStride = 2 * RegPageSize // the doorbell page, then the status page

	// RegSpaceSize is the size of the whole register space in bytes: the
	// banks, then the DMA window's page (dma.go), the engines' control
	// pages (idle.go) and the two contexts pages (vm.go).
	RegSpaceSize = ContextStatusPage + RegPageSize
)

// EngineStatusPage returns the offset of engine e's read-only status page.
func EngineStatusPage(e Engine) uint64 { return engineStatusBase + uint64(e)*RegPageSize }

// DoorbellPage returns the offset of channel c's user page.
func DoorbellPage(c Channel) uint64 { return channelBanksBase + uint64(c)*channelBankStride }

// ChannelStatusPage returns the offset of channel c's read-only status page.
func ChannelStatusPage(c Channel) uint64 { return DoorbellPage(c) + RegPageSize }

// Table returns every register of the device, each with its full offset,
// one entry per engine or channel for the banked ones, in offset order.
func Table() []Register {
	var t []Register
	add := func(name string, off uint64, w Writer, c PageClass) {
		t = append(t, Register{Name: name, Offset: off, Writer: w, Class: c})
	}
	add("ID", RegID, WrittenByDevice, PageReadOnly)
	add("MemSize", RegMemSize, WrittenByDevice, PageReadOnly)
	add("RingSize", RegRingSize, WrittenByDevice, PageReadOnly)
	add("ContextSize", RegContextSize, WrittenByDevice, PageReadOnly)
	add("Timestamp", RegTimestamp, WrittenByDevice, PageReadOnly)
	add("DeviceState", RegDeviceState, WrittenByDevice, PageReadOnly)
	add("Control", RegControl, WrittenByDriver, PagePrivileged)
	add("IrqCause", RegIrqCause, SetByDevice, PagePrivileged)
	for w := range uint64(IrqChannelWords) {
		add(fmt.Sprintf("IrqChannels[%d]", w), RegIrqChannels+8*w, SetByDevice, PagePrivileged)
	}
	add("InvalCtx", RegInvalCtx, WrittenByDriver, PagePrivileged)
	add("InvalVA", RegInvalVA, WrittenByDriver, PagePrivileged)
	add("InvalSize", RegInvalSize, WrittenByDriver, PagePrivileged)
	add("InvalGen", RegInvalGen, WrittenByDriver, PagePrivileged)
	for e := range Engine(NumEngines) {
		page := EngineStatusPage(e)
		add(fmt.Sprintf("Engine[%d].State", e), page+RegEngineState, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].DMAHeld", e), page+RegDMAHeld, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].NeedWakeup", e), page+RegNeedWakeup, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].Sleeps", e), page+RegSleeps, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].IdleBudgetNow", e), page+RegIdleBudgetNow, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].InvalAck", e), page+RegInvalAck, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].TLBHits", e), page+RegTLBHits, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].TLBMisses", e), page+RegTLBMisses, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].TLBWalkReads", e), page+RegTLBWalkReads, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].RunlistAck", e), page+RegRunlistAck, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].RunlistError", e), page+RegRunlistError, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].Preempts", e), page+RegPreempts, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].Switches", e), page+RegSwitches, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].Timeouts", e), page+RegTimeouts, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Engine[%d].Resets", e), page+RegResets, WrittenByDevice, PageReadOnly)
	}
	for c := range Channel(NumChannels) {
		user, status := DoorbellPage(c), ChannelStatusPage(c)
		add(fmt.Sprintf("Channel[%d].Doorbell", c), user+RegDoorbell, WrittenByDriver, PageUser)
		add(fmt.Sprintf("Channel[%d].IrqArm", c), user+RegIrqArm, WrittenByDriver, PageUser)
		add(fmt.Sprintf("Channel[%d].IrqTarget", c), user+RegIrqTarget, WrittenByDriver, PageUser)
		add(fmt.Sprintf("Channel[%d].Fault", c), status+RegChannelFault, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Channel[%d].FaultValue", c), status+RegChannelFaultValue, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Channel[%d].Fence", c), status+RegFence, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Channel[%d].FenceCycles", c), status+RegFenceCycles, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Channel[%d].IrqCount", c), status+RegIrqCount, WrittenByDevice, PageReadOnly)
	}
	for i := range WindowSlots {
		w := WindowRegs(i)
		add(fmt.Sprintf("Window[%d].Host", i), w+RegWinHost, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Window[%d].Bus", i), w+RegWinBus, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Window[%d].Size", i), w+RegWinSize, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Window[%d].Enable", i), w+RegWinEnable, WrittenByDriver, PagePrivileged)
	}
	for e := range Engine(NumEngines) {
		page := EngineControlPage(e)
		add(fmt.Sprintf("Engine[%d].IdleMode", e), page+RegIdleMode, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].IdleBudget", e), page+RegIdleBudget, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].IdleBudgetMin", e), page+RegIdleBudgetMin, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].IdleBudgetMax", e), page+RegIdleBudgetMax, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].RunlistBase", e), page+RegRunlistBase, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].RunlistLen", e), page+RegRunlistLen, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].RunlistGen", e), page+RegRunlistGen, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].Watchdog", e), page+RegWatchdog, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Engine[%d].PreemptTimeout", e), page+RegPreemptTimeout, WrittenByDriver, PagePrivileged)
	}
	for c := range Context(MaxContexts) {
		r, st := ContextRegs(c), ContextStatusRegs(c)
		add(fmt.Sprintf("Context[%d].Root", c), r+RegCtxRoot, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Context[%d].Flags", c), r+RegCtxFlags, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Context[%d].FaultAck", c), r+RegCtxFaultAck, WrittenByDriver, PagePrivileged)
		add(fmt.Sprintf("Context[%d].Faults", c), st+RegCtxFaults, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Context[%d].FaultVA", c), st+RegCtxFaultVA, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Context[%d].FaultInfo", c), st+RegCtxFaultInfo, WrittenByDevice, PageReadOnly)
	}
	return t
}
