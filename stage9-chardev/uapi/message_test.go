package uapi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// validCall returns a well-formed call of c: every in field set, seq 7.
func validCall(c *Call) (msg []byte, arg Arg) {
	arg = fill(c.New(), roleIn, roleInOut)
	return EncodeCall(7, arg), arg
}

// TestCallRoundTrip: every call, encoded by a client, decodes at the
// daemon to the same header and argument.
func TestCallRoundTrip(t *testing.T) {
	for i := range Calls {
		c := &Calls[i]
		msg, arg := validCall(c)
		assert.Equal(t, HeaderSize+c.CallSize(), len(msg), "%s: call of %d bytes", c.Name, len(msg))
		h, got, err := DecodeCall(msg, c.FDsIn)
		if !assert.NoError(t, err, "DecodeCall(%s)", c.Name) {
			continue
		}
		assert.Equal(t, (Header{Request: c.Request, Seq: 7}), h, "DecodeCall(%s) header", c.Name)
		if c.CallSize() == 0 {
			arg = c.New() // the call carries nothing: the daemon starts from zero
		}
		if !reflect.DeepEqual(got, arg) {
			t.Errorf("DecodeCall(%s) = %+v; want %+v", c.Name, got, arg)
		}
	}
}

// TestReplyRoundTrip: every reply, encoded by the daemon, decodes at the
// client to the argument the daemon filled, reserved fields included.
func TestReplyRoundTrip(t *testing.T) {
	for i := range Calls {
		c := &Calls[i]
		call := Header{Request: c.Request, Seq: 1<<64 - 1}
		sent := fill(c.New(), roleIn, roleOut, roleInOut, roleReserved)
		msg := EncodeReply(call, OK, sent)
		assert.Equal(t, HeaderSize+c.ReplySize(), len(msg), "%s: reply of %d bytes", c.Name, len(msg))
		got := c.New()
		h, err := DecodeReply(msg, c.FDsOut, got)
		if err != nil || h != call {
			t.Errorf("DecodeReply(%s) = %+v, %v; want %+v, nil", c.Name, h, err, call)
			continue
		}
		if c.ReplySize() == 0 {
			sent = c.New() // the reply carries nothing: the client's struct is left alone
		}
		if !reflect.DeepEqual(got, sent) {
			t.Errorf("DecodeReply(%s) = %+v; want %+v", c.Name, got, sent)
		}
	}
}

// TestErrorReply: an error reply echoes request and seq, carries the
// errno, zero payload for a known request and none for an unknown one.
func TestErrorReply(t *testing.T) {
	call := Header{Request: IoctlInfo, Seq: 42}
	msg := EncodeReply(call, ErrGone, nil)
	if len(msg) != HeaderSize+136 || !bytes.Equal(msg[HeaderSize:], make([]byte, 136)) {
		t.Errorf("INFO error reply = % x; want a header and 136 zero bytes", msg)
	}
	h, err := DecodeReply(msg, 0, new(Info))
	if err != nil || h != (Header{Request: IoctlInfo, Errno: ErrGone, Seq: 42}) {
		t.Errorf("DecodeReply(INFO error) = %+v, %v", h, err)
	}
	unknown := Header{Request: IOWR(0x7f, 4000), Seq: 3}
	if msg := EncodeReply(unknown, ErrBadRequest, nil); len(msg) != HeaderSize {
		t.Errorf("error reply to an unknown request is %d bytes; want %d", len(msg), HeaderSize)
	}
	// A daemon that does not know the call answers with no payload; the
	// client accepts that too.
	short := EncodeReply(Header{Request: IoctlAlloc, Seq: 5}, ErrBadRequest, nil)[:HeaderSize]
	if h, err := DecodeReply(short, 0, new(Alloc)); err != nil || h.Errno != ErrBadRequest {
		t.Errorf("DecodeReply(ALLOC error, no payload) = %+v, %v", h, err)
	}
}

// withHeader returns a copy of msg with header h.
func withHeader(msg []byte, h Header) []byte {
	msg = bytes.Clone(msg)
	h.Encode(msg)
	return msg
}

// TestDecodeCallRejects holds one case per rule of DecodeCall.
func TestDecodeCallRejects(t *testing.T) {
	alloc, _ := validCall(&Calls[Nr(IoctlAlloc)])
	hostReg, _ := validCall(&Calls[Nr(IoctlHostRegister)])
	attach, _ := validCall(&Calls[Nr(IoctlAttach)])
	version, _ := validCall(&Calls[Nr(IoctlVersion)])
	info, _ := validCall(&Calls[Nr(IoctlInfo)])
	allocVA := bytes.Clone(alloc)
	allocVA[HeaderSize+16] = 1 // Alloc.VA, an out field
	versionRes := bytes.Clone(version)
	versionRes[len(versionRes)-1] = 1 // Version.Reserved[2]
	closePad := EncodeCall(1, &ChannelClose{Channel: 3})
	closePad[HeaderSize+4] = 0x80 // ChannelClose.Pad

	tests := []struct {
		name string
		msg  []byte
		nfds int
		want Errno
	}{
		{"empty", nil, 0, ErrSize},
		{"short header", alloc[:HeaderSize-1], 0, ErrSize},
		{"errno in a call", withHeader(alloc, Header{Request: IoctlAlloc, Errno: ErrBusy}), 0, ErrInval},
		{"type byte 'd'", withHeader(alloc, Header{Request: IOC(IocRead|IocWrite, 'd', 0x04, 24)}), 0, ErrBadRequest},
		{"unknown nr", withHeader(alloc, Header{Request: IOWR(0x0f, 24)}), 0, ErrBadRequest},
		{"nr 0xff", withHeader(alloc, Header{Request: IOWR(0xff, 24)}), 0, ErrBadRequest},
		{"ALLOC's nr, wrong dir", withHeader(alloc, Header{Request: IOW(0x04, 24)}), 0, ErrBadRequest},
		{"ALLOC's nr, wrong size", withHeader(alloc, Header{Request: IOWR(0x04, 32)}), 0, ErrBadRequest},
		{"payload short", alloc[:len(alloc)-1], 0, ErrSize},
		{"payload long", append(bytes.Clone(alloc), 0), 0, ErrSize},
		{"IOR call with a payload", append(bytes.Clone(attach), make([]byte, 24)...), 0, ErrSize},
		{"header only for IOWR", alloc[:HeaderSize], 0, ErrSize},
		{"fd where none belongs", alloc, 1, ErrFDs},
		{"HOST_REGISTER without its memfd", hostReg, 0, ErrFDs},
		{"HOST_REGISTER with two fds", hostReg, 2, ErrFDs},
		{"INFO with an fd", info, 1, ErrFDs},
		{"out field set", allocVA, 0, ErrInval},
		{"reserved field set", versionRes, 0, ErrInval},
		{"pad set", closePad, 0, ErrInval},
	}
	for _, tt := range tests {
		h, arg, err := DecodeCall(tt.msg, tt.nfds)
		if !errors.Is(err, tt.want) || arg != nil {
			t.Errorf("DecodeCall(%s) = %v, %v; want %v", tt.name, arg, err, tt.want)
		}
		if len(tt.msg) >= HeaderSize && h != DecodeHeader(tt.msg) {
			t.Errorf("DecodeCall(%s) header = %+v; want the message's, to echo", tt.name, h)
		}
		assert.Equal(t, tt.want, ErrnoOf(err), "ErrnoOf(DecodeCall(%s))", tt.name)
	}
}

// TestDecodeReplyRejects holds one case per rule of DecodeReply.
func TestDecodeReplyRejects(t *testing.T) {
	attach := EncodeReply(Header{Request: IoctlAttach, Seq: 1}, OK, &Attach{Context: 5})
	free := EncodeReply(Header{Request: IoctlFree, Seq: 1}, OK, &Free{VA: 1})
	failed := EncodeReply(Header{Request: IoctlAttach, Seq: 1}, ErrGone, nil)
	dirty := bytes.Clone(failed)
	dirty[len(dirty)-1] = 1
	tests := []struct {
		name string
		msg  []byte
		nfds int
		arg  Arg
		want Errno
	}{
		{"short header", attach[:8], 3, new(Attach), ErrSize},
		{"another call's reply", attach, 3, new(Info), ErrBadRequest},
		{"payload short", attach[:len(attach)-8], 3, new(Attach), ErrSize},
		{"payload on an IOW reply", append(bytes.Clone(free), 0), 0, new(Free), ErrSize},
		{"ATTACH without its fds", attach, 2, new(Attach), ErrFDs},
		{"error with fds", failed, 3, new(Attach), ErrFDs},
		{"error with a short payload", failed[:HeaderSize+8], 0, new(Attach), ErrSize},
		{"error with a nonzero payload", dirty, 0, new(Attach), ErrInval},
	}
	for _, tt := range tests {
		_, err := DecodeReply(tt.msg, tt.nfds, tt.arg)
		assert.ErrorIs(t, err, tt.want, "DecodeReply(%s)", tt.name)
	}
}

// TestEncodePanicsOnBugs: arguments only a buggy caller passes panic.
func TestEncodePanicsOnBugs(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"EncodeCall(nil)", func() { EncodeCall(1, nil) }},
		{"EncodeCall(nil *Alloc)", func() { EncodeCall(1, (*Alloc)(nil)) }},
		{"success reply with another call's argument", func() { EncodeReply(Header{Request: IoctlAlloc}, OK, &Free{}) }},
		{"success reply to an unknown request", func() { EncodeReply(Header{Request: IO(0x7f)}, OK, &Free{}) }},
	}
	for _, tt := range tests {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tt.name)
				}
			}()
			tt.f()
		}()
	}
}
