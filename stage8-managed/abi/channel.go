package abi

import "fmt"

// Channel is the unit of submission: what a client of the device owns. A
// channel has a doorbell, a place for commands, and its completions, and a
// fault state of its own. Since this stage many channels share an engine:
// the engine serves the channels its runlist names (runlist.go), and a
// channel belongs to no engine until a runlist puts it on one. Channel e is
// engine e's default channel, on its runlist from reset.
type Channel uint16

// NumChannels is the number of channels the device has: 128, one bit each
// in the IrqChannelWords words of RegIrqChannels — so that one engine can
// serve a full runlist (MaxRunlist) beside the other engine's default
// channel.
const NumChannels = 128

// DefaultChannel returns engine e's default channel.
func DefaultChannel(e Engine) Channel { return Channel(e) }

// Valid reports whether c is a channel of the device.
func (c Channel) Valid() bool { return c < NumChannels }

func (c Channel) String() string { return fmt.Sprintf("channel %d", uint16(c)) }

// ChannelFault is why the device stopped serving a channel: the value of
// RegChannelFault. A channel faults when what the driver wrote breaks the
// protocol — not when a command is bad (that is a Status for that command
// alone, and the channel goes on). A faulted channel stays stopped; the
// device goes on serving every other channel. RegChannelFaultValue holds
// the offending value.
type ChannelFault uint64

const (
	// FaultNone: the channel is being served.
	FaultNone ChannelFault = 0
	// FaultDoorbell: the doorbell was written with a value the protocol
	// forbids (see the doorbell's register comment); RegChannelFaultValue
	// is that value.
	FaultDoorbell ChannelFault = 1
)

func (f ChannelFault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultDoorbell:
		return "bad doorbell"
	case FaultTimeout:
		return "watchdog timeout"
	case FaultState:
		return "bad saved state"
	case FaultContextSave:
		return "bad engine-context save area"
	}
	return fmt.Sprintf("fault(%d)", uint64(f))
}

// Error makes a fault usable as an error: errors.Is(err, abi.FaultDoorbell).
func (f ChannelFault) Error() string { return "softgpu: channel fault: " + f.String() }
