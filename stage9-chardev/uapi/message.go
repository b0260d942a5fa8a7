package uapi

import (
	"encoding/binary"
	"fmt"
)

// Messages. Every message, call or reply, is one SOCK_SEQPACKET datagram:
//
//	0       4       8               16
//	+-------+-------+---------------+-------------- - -
//	|request| errno |      seq      |  payload: the argument struct, or nothing
//	+-------+-------+---------------+-------------- - -
//
// and the file descriptors it carries travel beside it, in one SCM_RIGHTS
// control message. The daemon runs DecodeCall on every datagram a client
// sends and answers with EncodeReply; a client builds its calls with
// EncodeCall and reads the answers with DecodeReply.

// Header starts every message.
type Header struct {
	Request uint32 // the request number; a reply echoes the call's
	Errno   Errno  // zero in a call; the call's outcome in its reply
	Seq     uint64 // chosen by the client; a reply echoes its call's
}

// Encode writes h into the first HeaderSize bytes of b.
func (h Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], h.Request)
	binary.LittleEndian.PutUint32(b[4:], uint32(h.Errno))
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
}

// DecodeHeader reads a header from the first HeaderSize bytes of b.
func DecodeHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		Request: binary.LittleEndian.Uint32(b[0:]),
		Errno:   Errno(binary.LittleEndian.Uint32(b[4:])),
		Seq:     binary.LittleEndian.Uint64(b[8:]),
	}
}

// EncodeCall returns the message of a call: a header with arg's request
// and seq, then arg itself if the call carries it (IocWrite). The caller
// sends it with the call's FDsIn descriptors. It panics if arg is nil or
// not an argument struct of this package.
func EncodeCall(seq uint64, arg Arg) []byte {
	c := callOf(arg)
	msg := make([]byte, HeaderSize+c.CallSize())
	Header{Request: c.Request, Seq: seq}.Encode(msg)
	if c.CallSize() != 0 {
		encodeArg(msg[HeaderSize:], arg)
	}
	return msg
}

// DecodeCall decodes a call the daemon received: msg is the datagram and
// nfds the number of file descriptors that came with it. It returns the
// header and a new argument struct of the call, filled from the message
// (zero for a call that carries none, IocRead only: the daemon fills it
// for the reply).
//
// Every datagram is a stranger's, so DecodeCall accepts any bytes and
// never panics. Its error wraps the Errno to answer with, checked in this
// order:
//
//	ErrSize        msg is shorter than a header
//	ErrInval       the header's Errno is not zero
//	ErrBadRequest  no call has the request number (Lookup)
//	ErrSize        the payload is not the call's CallSize
//	ErrFDs         nfds is not the call's FDsIn
//	ErrInval       an out or reserved field of the argument is not zero
//
// With any error but the first the header is returned too, so that the
// daemon can echo its request and seq in the error reply. The daemon must
// close the descriptors of a call it refuses.
func DecodeCall(msg []byte, nfds int) (Header, Arg, error) {
	if len(msg) < HeaderSize {
		return Header{}, nil, fmt.Errorf("uapi: message of %d bytes, shorter than the %d-byte header: %w", len(msg), HeaderSize, ErrSize)
	}
	h := DecodeHeader(msg)
	if h.Errno != OK {
		return h, nil, fmt.Errorf("uapi: call with errno %d; a call's errno must be zero: %w", uint32(h.Errno), ErrInval)
	}
	c, err := Lookup(h.Request)
	if err != nil {
		return h, nil, err
	}
	payload := msg[HeaderSize:]
	if len(payload) != c.CallSize() {
		return h, nil, fmt.Errorf("uapi: %s call with %d bytes of payload; want %d: %w", c.Name, len(payload), c.CallSize(), ErrSize)
	}
	if nfds != c.FDsIn {
		return h, nil, fmt.Errorf("uapi: %s call with %d file descriptors; want %d: %w", c.Name, nfds, c.FDsIn, ErrFDs)
	}
	arg := c.New()
	if len(payload) != 0 {
		if err := decodeArg(payload, arg, true); err != nil {
			return h, nil, err
		}
	}
	return h, arg, nil
}

// EncodeReply returns the reply to the call with header call: its request
// and seq, errno, and the payload. On success (errno OK) the payload is
// arg if the call returns it (IocRead), and the daemon sends the call's
// FDsOut descriptors with it. On failure arg is ignored (it may be nil),
// no descriptor goes with the reply, and the payload is ReplySize zero
// bytes — or none at all for a request no call has, since there is no
// struct to return.
//
// It panics on a success reply to a request no call has, or with an arg
// of the wrong call: both are bugs in the daemon.
func EncodeReply(call Header, errno Errno, arg Arg) []byte {
	h := Header{Request: call.Request, Errno: errno, Seq: call.Seq}
	if errno != OK {
		size := 0
		if c, err := Lookup(call.Request); err == nil {
			size = c.ReplySize()
		}
		msg := make([]byte, HeaderSize+size)
		h.Encode(msg)
		return msg
	}
	c := callOf(arg)
	if c.Request != call.Request {
		panic(fmt.Sprintf("uapi: success reply to request %#08x with the argument of %s", call.Request, c.Name))
	}
	msg := make([]byte, HeaderSize+c.ReplySize())
	h.Encode(msg)
	if c.ReplySize() != 0 {
		encodeArg(msg[HeaderSize:], arg)
	}
	return msg
}

// DecodeReply decodes the reply to a call whose argument was arg: msg is
// the datagram and nfds the number of file descriptors that came with it.
// On success it fills arg from the reply (for a call that returns it) and
// returns the header: the caller matches its Seq, and h.Errno is the
// call's outcome, OK or an Errno to return to its own caller.
//
// An error means the reply itself is malformed — the daemon broke the
// protocol, and the connection is best closed: a short message (ErrSize),
// a request other than arg's (ErrBadRequest), a payload of the wrong size
// (ErrSize), the wrong number of descriptors (ErrFDs), or an error reply
// whose payload is not zero (ErrInval). Reserved fields of a success
// reply are not checked. DecodeReply panics if arg is nil or not an
// argument struct of this package.
func DecodeReply(msg []byte, nfds int, arg Arg) (Header, error) {
	c := callOf(arg)
	if len(msg) < HeaderSize {
		return Header{}, fmt.Errorf("uapi: %s reply of %d bytes, shorter than the %d-byte header: %w", c.Name, len(msg), HeaderSize, ErrSize)
	}
	h := DecodeHeader(msg)
	if h.Request != c.Request {
		return h, fmt.Errorf("uapi: reply to request %#08x; the call was %s (%#08x): %w", h.Request, c.Name, c.Request, ErrBadRequest)
	}
	payload := msg[HeaderSize:]
	if h.Errno != OK {
		if nfds != 0 {
			return h, fmt.Errorf("uapi: %s error reply with %d file descriptors; want 0: %w", c.Name, nfds, ErrFDs)
		}
		if len(payload) != 0 && len(payload) != c.ReplySize() {
			return h, fmt.Errorf("uapi: %s error reply with %d bytes of payload; want 0 or %d: %w", c.Name, len(payload), c.ReplySize(), ErrSize)
		}
		for _, x := range payload {
			if x != 0 {
				return h, fmt.Errorf("uapi: %s error reply with a payload that is not zero: %w", c.Name, ErrInval)
			}
		}
		return h, nil
	}
	if len(payload) != c.ReplySize() {
		return h, fmt.Errorf("uapi: %s reply with %d bytes of payload; want %d: %w", c.Name, len(payload), c.ReplySize(), ErrSize)
	}
	if nfds != c.FDsOut {
		return h, fmt.Errorf("uapi: %s reply with %d file descriptors; want %d: %w", c.Name, nfds, c.FDsOut, ErrFDs)
	}
	if len(payload) != 0 {
		return h, decodeArg(payload, arg, false)
	}
	return h, nil
}
