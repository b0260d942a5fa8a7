package uapi

import (
	"errors"
	"fmt"
)

// Errno is the outcome of a call, in the Errno word of its reply: OK, or
// one of the errors below. The numbers are the ABI — a C client compares
// against SOFTGPU_ERR_* — so each one is pinned by a test and never
// reused.
//
// An Errno other than OK is an error value, and a comparable one, so a
// client library may wrap it and its caller test for it with
// errors.Is(err, uapi.ErrNoMemory). The decoders in this package return
// their errors wrapping an Errno too: the daemon answers a message it
// cannot decode with ErrnoOf(err).
type Errno uint32

// Every errno.
const (
	OK               Errno = 0  // success
	ErrBadRequest    Errno = 1  // the request number is not one of Calls (wrong type byte, nr, dir or size)
	ErrSize          Errno = 2  // the message is shorter than a header, or its payload is not the size the request says
	ErrFDs           Errno = 3  // the message carries a different number of file descriptors than the call takes
	ErrInval         Errno = 4  // a bad argument: a value out of range, or a reserved, pad or out field that is not zero in a call
	ErrNotNegotiated Errno = 5  // a call other than VERSION before VERSION has succeeded on the connection
	ErrVersion       Errno = 6  // VERSION: the client's major version is not the daemon's
	ErrNoMemory      Errno = 7  // not enough device memory (or bus space, for HOST_REGISTER)
	ErrNoChannel     Errno = 8  // CHANNEL_OPEN: every channel is in use, or the engine's runlist is full
	ErrNoEntry       Errno = 9  // no such channel, allocation or client of yours
	ErrPerm          Errno = 10 // the call is not allowed to this client
	ErrGone          Errno = 11 // the device is shutting down or has stopped
	ErrBusy          Errno = 12 // the object is in use (a channel with work in flight, memory a channel still uses); at ATTACH and CHANNEL_OPEN: the uid is barred for a while, as an engine was reset under a command of its
	ErrFault         Errno = 13 // the object is faulted: a channel or context the device has stopped serving
	ErrQuota         Errno = 14 // the call would take the client, or its uid, past a quota the daemon sets (CLIENT_QUOTA shows them): since 2.1
)

var errnoText = [...]string{
	OK:               "ok",
	ErrBadRequest:    "bad request number",
	ErrSize:          "wrong message size",
	ErrFDs:           "wrong number of file descriptors",
	ErrInval:         "invalid argument",
	ErrNotNegotiated: "VERSION not called yet",
	ErrVersion:       "major version mismatch",
	ErrNoMemory:      "out of device memory",
	ErrNoChannel:     "no channel free",
	ErrNoEntry:       "no such object",
	ErrPerm:          "not permitted",
	ErrGone:          "device gone",
	ErrBusy:          "busy",
	ErrFault:         "faulted",
	ErrQuota:         "over quota",
}

// String returns what the errno means, in a few words.
func (e Errno) String() string {
	if int(e) < len(errnoText) {
		return errnoText[e]
	}
	return fmt.Sprintf("errno(%d)", uint32(e))
}

// Error makes an Errno usable as an error.
func (e Errno) Error() string { return "softgpu: " + e.String() }

// ErrnoOf returns the Errno to put in the reply to a call that ended in
// err: OK for nil, the Errno err wraps, or ErrInval for an error that
// wraps none (a daemon that returns such an error has a bug, and the
// client still learns that its call failed).
func ErrnoOf(err error) Errno {
	if err == nil {
		return OK
	}
	var e Errno
	if errors.As(err, &e) {
		return e
	}
	return ErrInval
}
