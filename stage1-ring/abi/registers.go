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
//	0x1000  control          privileged  stop
//	        engine e status  read-only   one page per engine
//	        channel c        user        the doorbell page, one per channel
//	        channel c status read-only   fault, one per channel

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
)

func (w Writer) String() string {
	if w == WrittenByDevice {
		return "device"
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

// Values of RegEngineState.
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

	// RegSpaceSize is the size of the whole register space in bytes.
	RegSpaceSize = channelBanksBase + NumChannels*channelBankStride
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
	add("Timestamp", RegTimestamp, WrittenByDevice, PageReadOnly)
	add("DeviceState", RegDeviceState, WrittenByDevice, PageReadOnly)
	add("Control", RegControl, WrittenByDriver, PagePrivileged)
	for e := range Engine(NumEngines) {
		page := EngineStatusPage(e)
		add(fmt.Sprintf("Engine[%d].State", e), page+RegEngineState, WrittenByDevice, PageReadOnly)
	}
	for c := range Channel(NumChannels) {
		user, status := DoorbellPage(c), ChannelStatusPage(c)
		add(fmt.Sprintf("Channel[%d].Doorbell", c), user+RegDoorbell, WrittenByDriver, PageUser)
		add(fmt.Sprintf("Channel[%d].Fault", c), status+RegChannelFault, WrittenByDevice, PageReadOnly)
		add(fmt.Sprintf("Channel[%d].FaultValue", c), status+RegChannelFaultValue, WrittenByDevice, PageReadOnly)
	}
	return t
}
