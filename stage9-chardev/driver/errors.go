package driver

import (
	"errors"
	"fmt"

	"softgpu/stage9-chardev/abi"
)

// The errors a caller of the driver can get. Each is a sentinel, tested
// with errors.Is; the messages of the wrapped errors say which input was
// wrong.
var (
	// ErrClosed is returned by every call made after Close, and by a wait
	// that the device stopping interrupted before the engine took its
	// command.
	ErrClosed = errors.New("softgpu: device closed")
	// ErrNoDevice reports that the registers do not identify a softgpu.
	ErrNoDevice = errors.New("softgpu: no device at these registers")
	// ErrNoEngine reports an engine number the device does not have.
	ErrNoEngine = errors.New("softgpu: no such engine")
	// ErrNoChannel reports a channel number the device does not have.
	ErrNoChannel = errors.New("softgpu: no such channel")
	// ErrConfig reports an unusable configuration; the message names the
	// field.
	ErrConfig = errors.New("softgpu: bad config")
	// ErrChannelFaulted reports that the device stopped serving a channel
	// because what was written to it broke the protocol. It wraps the
	// abi.ChannelFault as well.
	ErrChannelFaulted = errors.New("softgpu: channel faulted")
	// ErrNotStarted reports a submission on a channel opened with
	// ChannelOptions.Start that has not been started (Channel.Start).
	ErrNotStarted = errors.New("softgpu: channel not started")
)

// CommandError is a command the device refused or could not finish. It wraps
// the device's abi.Status, so errors.Is(err, abi.StatusOutOfRange) works.
type CommandError struct {
	Engine abi.Engine
	Op     abi.Opcode
	Seq    uint64
	Status abi.Status
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("softgpu: %v on the %v engine (seq %d): %s", e.Op, e.Engine, e.Seq, e.Status.String())
}

func (e *CommandError) Unwrap() error { return e.Status }
