package server_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// These tests send the daemon every kind of message uapi.DecodeCall
// refuses, and calls in the wrong order or with the wrong arguments, and
// hold it to its contract: each gets an error reply with the right errno
// (not a crash, not silence, not a dropped connection), every descriptor
// that came with it is closed, and the connection goes on serving.

// withRequest returns msg with its request number replaced.
func withRequest(msg []byte, req uint32) []byte {
	binary.LittleEndian.PutUint32(msg[0:], req)
	return msg
}

// TestAClientOfMajorVersion2IsRefused: a client of uapi 2.3, the last
// 2.x, is refused at VERSION with ErrVersion and left unnegotiated. A
// 2.x client never calls CHANNEL_START, without which a 3.0 daemon never
// serves a channel: served, it would submit to channels that never run
// and hang with no error. The refusal, in the daemon's log, names both
// versions and says what changed.
func TestAClientOfMajorVersion2IsRefused(t *testing.T) {
	var log syncLog
	s := serve(t, server.Config{Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r := dialRaw(t, s.Node())
	errno, _ := r.call(&uapi.Version{Major: 2, Minor: 3})
	require.Equal(t, uapi.ErrVersion, errno, "VERSION 2.3 to a daemon of %d.%d", uapi.VersionMajor, uapi.VersionMinor)
	errno, _ = r.call(&uapi.Info{})
	assert.Equal(t, uapi.ErrNotNegotiated, errno, "INFO after the refused VERSION")
	assert.Contains(t, log.String(), fmt.Sprintf("client speaks 2.3, the daemon %d.%d", uapi.VersionMajor, uapi.VersionMinor), "the refusal, in the daemon's log")
	assert.Contains(t, log.String(), "since 3.0 the daemon serves a channel only after CHANNEL_START", "the refusal, in the daemon's log")
}

func TestMalformedMessagesGetAnErrnoAndTheConnectionGoesOn(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	r.negotiate()
	memfd := newMemfd(t, 4096, unix.F_SEAL_SHRINK)
	t.Cleanup(func() { unix.Close(memfd) })
	many := func(n int) []int {
		fds := make([]int, n)
		for i := range fds {
			fds[i] = memfd // the kernel passes a new descriptor for each
		}
		return fds
	}
	version := func() uapi.Arg { return &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor} }
	tests := []struct {
		name  string
		msg   func(seq uint64) []byte
		fds   []int
		errno uapi.Errno
		echo  bool // the reply must echo the call's request and seq
	}{
		{"empty header", func(uint64) []byte { return []byte{1} }, nil, uapi.ErrSize, false},
		{"short header", func(seq uint64) []byte { return uapi.EncodeCall(seq, version())[:uapi.HeaderSize-1] }, nil, uapi.ErrSize, false},
		{"header only", func(seq uint64) []byte { return uapi.EncodeCall(seq, version())[:uapi.HeaderSize] }, nil, uapi.ErrSize, true},
		{"payload a byte short", func(seq uint64) []byte { m := uapi.EncodeCall(seq, version()); return m[:len(m)-1] }, nil, uapi.ErrSize, true},
		{"payload a byte long", func(seq uint64) []byte { return append(uapi.EncodeCall(seq, version()), 0) }, nil, uapi.ErrSize, true},
		{"payload on a call that takes none", func(seq uint64) []byte { return append(uapi.EncodeCall(seq, &uapi.Info{}), make([]byte, 8)...) }, nil, uapi.ErrSize, true},
		{"unknown nr", func(seq uint64) []byte { return withRequest(uapi.EncodeCall(seq, version()), uapi.IOWR(0x0a, 64)) }, nil, uapi.ErrBadRequest, true},
		{"nr 0xff", func(seq uint64) []byte { return withRequest(uapi.EncodeCall(seq, version()), uapi.IOWR(0xff, 64)) }, nil, uapi.ErrBadRequest, true},
		{"another driver's type byte", func(seq uint64) []byte {
			return withRequest(uapi.EncodeCall(seq, version()), uapi.IOC(uapi.IocRead|uapi.IocWrite, 'H', 0, 64))
		}, nil, uapi.ErrBadRequest, true},
		{"VERSION with dir IOR", func(seq uint64) []byte { return withRequest(uapi.EncodeCall(seq, version()), uapi.IOR(0, 64)) }, nil, uapi.ErrBadRequest, true},
		{"VERSION with dir none", func(seq uint64) []byte {
			return withRequest(uapi.EncodeCall(seq, version())[:uapi.HeaderSize], uapi.IO(0))
		}, nil, uapi.ErrBadRequest, true},
		{"VERSION with size 72", func(seq uint64) []byte {
			return withRequest(append(uapi.EncodeCall(seq, version()), make([]byte, 8)...), uapi.IOWR(0, 72))
		}, nil, uapi.ErrBadRequest, true},
		{"nonzero errno in a call", func(seq uint64) []byte {
			m := uapi.EncodeCall(seq, version())
			binary.LittleEndian.PutUint32(m[4:], uint32(uapi.ErrFault))
			return m
		}, nil, uapi.ErrInval, true},
		{"nonzero reserved", func(seq uint64) []byte {
			return uapi.EncodeCall(seq, &uapi.Version{Major: uapi.VersionMajor, Reserved: [3]uint64{0, 1, 0}})
		}, nil, uapi.ErrInval, true},
		{"nonzero out field", func(seq uint64) []byte {
			return uapi.EncodeCall(seq, &uapi.Version{Major: uapi.VersionMajor, Patch: 7})
		}, nil, uapi.ErrInval, true},
		{"nonzero pad", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.ChannelClose{Channel: 2, Pad: 1}) }, nil, uapi.ErrInval, true},
		{"longer than MaxMessage", func(seq uint64) []byte {
			return append(uapi.EncodeCall(seq, version()), make([]byte, uapi.MaxMessage)...)
		}, nil, uapi.ErrSize, true},
		{"an fd with a call that takes none", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.Info{}) }, many(1), uapi.ErrFDs, true},
		{"HOST_REGISTER with no fd", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.HostRegister{Size: 4096}) }, nil, uapi.ErrFDs, true},
		{"HOST_REGISTER with two fds", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.HostRegister{Size: 4096}) }, many(2), uapi.ErrFDs, true},
		{"more fds than the daemon makes room for", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.Info{}) }, many(40), uapi.ErrFDs, true},
		{"the most fds a message may carry", func(seq uint64) []byte { return uapi.EncodeCall(seq, &uapi.Info{}) }, many(253), uapi.ErrFDs, true},
	}
	before := settledFDs(t) // settled: descriptors earlier tests dropped are closed by collections
	for _, tt := range tests {
		r.seq++
		msg := tt.msg(r.seq)
		h := r.sendRecv(msg, tt.fds...)
		assert.Equal(t, tt.errno, h.Errno, "%s: reply errno %d (%v); want %d (%v)", tt.name, h.Errno, h.Errno, tt.errno, tt.errno)
		if tt.echo {
			if sent := uapi.DecodeHeader(msg); h.Request != sent.Request || h.Seq != sent.Seq {
				t.Errorf("%s: reply is to request %#08x seq %d; want %#08x seq %d", tt.name, h.Request, h.Seq, sent.Request, sent.Seq)
			}
		}
		// The connection goes on: a valid call right after succeeds.
		var in uapi.Info
		if errno, _ := r.call(&in); errno != uapi.OK || in.MemoryTotal == 0 {
			t.Fatalf("%s: the next INFO = %v, MemoryTotal %d; want OK and the device's size", tt.name, errno, in.MemoryTotal)
		}
	}
	if after := openFDs(t); after > before {
		t.Errorf("the daemon's process has %d descriptors open after the refused calls; want at most %d, as before them", after, before)
	}
}

// TestCallsOutOfOrderAreRefused: VERSION comes first, ATTACH before
// anything that needs a context, and ATTACH once.
func TestCallsOutOfOrderAreRefused(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	memfd := newMemfd(t, 4096, unix.F_SEAL_SHRINK)
	t.Cleanup(func() { unix.Close(memfd) })
	expect := func(step string, want uapi.Errno, arg uapi.Arg, fds ...int) {
		t.Helper()
		if errno, _ := r.call(arg, fds...); errno != want {
			t.Errorf("%s: %T = %v; want %v", step, arg, errno, want)
		}
	}
	for _, arg := range []uapi.Arg{&uapi.Info{}, &uapi.ClientInfo{}, &uapi.Attach{}, &uapi.ChannelOpen{}, &uapi.Alloc{Size: 4096}} {
		expect("before VERSION", uapi.ErrNotNegotiated, arg)
	}
	expect("before VERSION", uapi.ErrNotNegotiated, &uapi.HostRegister{Size: 4096}, memfd)
	expect("VERSION of another major", uapi.ErrVersion, &uapi.Version{Major: uapi.VersionMajor + 1})
	expect("after a refused VERSION", uapi.ErrNotNegotiated, &uapi.Info{})
	expect("VERSION", uapi.OK, &uapi.Version{Major: uapi.VersionMajor, Minor: 99})
	expect("after VERSION", uapi.OK, &uapi.Info{})
	for _, arg := range []uapi.Arg{&uapi.ChannelOpen{Engine: uint32(abi.EngineCopy)}, &uapi.ChannelClose{Channel: 2},
		&uapi.Alloc{Size: 4096}, &uapi.Free{VA: 2 << 20}, &uapi.HostUnregister{VA: 2 << 20}} {
		expect("before ATTACH", uapi.ErrNotNegotiated, arg)
	}
	expect("before ATTACH", uapi.ErrNotNegotiated, &uapi.HostRegister{Size: 4096}, memfd)
	expect("ATTACH", uapi.OK, &uapi.Attach{})
	expect("ATTACH twice", uapi.ErrBusy, &uapi.Attach{})
	expect("CHANNEL_OPEN after ATTACH", uapi.OK, &uapi.ChannelOpen{Engine: uint32(abi.EngineCopy)})
}

// TestBadArgumentsAreRefused: calls that decode but ask for what the
// client may not have.
func TestBadArgumentsAreRefused(t *testing.T) {
	const maxChannels = 4
	s := serve(t, server.Config{ClientQuota: server.Quota{Channels: maxChannels}})
	r := dialRaw(t, s.Node())
	r.attach()
	tests := []struct {
		name string
		arg  uapi.Arg
		want uapi.Errno
	}{
		{"an engine the device lacks", &uapi.ChannelOpen{Engine: abi.NumEngines}, uapi.ErrInval},
		{"an engine number past any", &uapi.ChannelOpen{Engine: 1 << 31}, uapi.ErrInval},
		{"a priority past the highest", &uapi.ChannelOpen{Engine: uint32(abi.EngineCopy), Priority: abi.MaxPriority + 1}, uapi.ErrInval},
		{"closing a channel never opened", &uapi.ChannelClose{Channel: 9}, uapi.ErrNoEntry},
		{"closing an engine's default channel", &uapi.ChannelClose{Channel: uint32(abi.DefaultChannel(abi.EngineCopy))}, uapi.ErrNoEntry},
		{"closing a channel past the device's", &uapi.ChannelClose{Channel: 1 << 20}, uapi.ErrNoEntry},
		{"ALLOC of 0 bytes", &uapi.Alloc{Size: 0}, uapi.ErrInval},
		{"ALLOC past the device's memory", &uapi.Alloc{Size: 1 << 40}, uapi.ErrNoMemory},
		{"ALLOC of 2^64-1 bytes", &uapi.Alloc{Size: ^uint64(0)}, uapi.ErrNoMemory},
		{"ALLOC with a page size no device has", &uapi.Alloc{Size: 4096, PageSize: 3}, uapi.ErrInval},
		{"FREE of an address never allocated", &uapi.Free{VA: 2 << 20}, uapi.ErrNoEntry},
		{"FREE of 0", &uapi.Free{VA: 0}, uapi.ErrNoEntry},
		{"HOST_UNREGISTER of an address never registered", &uapi.HostUnregister{VA: 2 << 20}, uapi.ErrNoEntry},
		{"CLIENT_INFO past the last client", &uapi.ClientInfo{Index: 1 << 30}, uapi.ErrNoEntry},
	}
	for _, tt := range tests {
		if errno, _ := r.call(tt.arg); errno != tt.want {
			t.Errorf("%s: %v; want %v", tt.name, errno, tt.want)
		}
	}
	// A freed allocation cannot be freed twice.
	va := r.alloc(4096)
	r.mustCall(&uapi.Free{VA: va})
	if errno, _ := r.call(&uapi.Free{VA: va}); errno != uapi.ErrNoEntry {
		t.Errorf("FREE twice: %v; want %v", errno, uapi.ErrNoEntry)
	}
	// One client may hold its quota of channels and no more.
	for i := range maxChannels {
		if errno, _ := r.call(&uapi.ChannelOpen{Engine: uint32(i % abi.NumEngines)}); errno != uapi.OK {
			t.Fatalf("CHANNEL_OPEN %d of %d: %v", i+1, maxChannels, errno)
		}
	}
	if errno, _ := r.call(&uapi.ChannelOpen{Engine: uint32(abi.EngineCopy)}); errno != uapi.ErrQuota {
		t.Errorf("CHANNEL_OPEN past the client's channel quota: %v; want %v", errno, uapi.ErrQuota)
	}
	if errno, _ := r.call(&uapi.Info{}); errno != uapi.OK {
		t.Errorf("INFO after the refusals: %v", errno)
	}
}
