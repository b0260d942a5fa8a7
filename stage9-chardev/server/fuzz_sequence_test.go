package server_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// FuzzCallSequence drives a hostile client through a *sequence* of what a
// stranger can do — control calls with any payload, stores anywhere in
// its channels' user pages, command slots full of any bytes, doorbells,
// kicks, hanging up half-way — against one daemon, beside a well-behaved
// client. After every sequence the stranger is torn down, and the
// well-behaved client must still make a round trip within liveBound with
// every byte right, and the daemon must list exactly the clients it had
// before: no crash, no wedge, no leak of a client.
//
// A script is read as records; the first byte of each picks the act
// (modulo the number of acts), and the act reads what it needs after it,
// zeros past the script's end:
//
//	call     nr byte, then the call's payload   any call, any bytes, the memfds it takes
//	store    channel byte, offset u16, value u64 a store anywhere in a channel's user page
//	ring     channel byte, value u64            the doorbell, then a kick
//	slot     channel byte, index byte, 64 bytes a command slot, whatever it holds
//	kick     -                                  the kick eventfd alone
//	hang up  -                                  the connection closed mid-sequence
//
// CI fuzzes it briefly (.ci/run's fuzz step); `go test` runs its seeds.
func FuzzCallSequence(f *testing.F) {
	s := serve(f, server.Config{})
	w := dialWellBehaved(f, s.Node())
	ctl := control(f, s.Node())
	baseline := clientCount(f, ctl)

	for _, seed := range sequenceSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		runScript(t, s.Node(), script)
		w.roundTrip(t, "after a script", byte(len(script)))
		waitFor(t, "the stranger torn down", func() (bool, string) {
			n := clientCount(t, ctl)
			return n == baseline, fmt.Sprintf("%d clients; %d before", n, baseline)
		})
	})
}

// Acts of a script, in the order of the first byte's values.
const (
	actCall = iota
	actStore
	actRing
	actSlot
	actKick
	actHangUp
	numActs
)

// script reads a script's bytes, zeros past its end.
type script struct {
	b   []byte
	pos int
}

func (s *script) done() bool { return s.pos >= len(s.b) }

func (s *script) bytes(n int) []byte {
	out := make([]byte, n)
	if s.pos < len(s.b) {
		copy(out, s.b[s.pos:])
	}
	s.pos += n
	return out
}

func (s *script) byte() byte  { return s.bytes(1)[0] }
func (s *script) u16() uint16 { return binary.LittleEndian.Uint16(s.bytes(2)) }
func (s *script) u64() uint64 { return binary.LittleEndian.Uint64(s.bytes(8)) }

// runScript plays script as one stranger's connection, then hangs up.
func runScript(t *testing.T, node string, b []byte) {
	r := dialRaw(t, node)
	var chans []*rawChannel
	sc := &script{b: b}
	for steps := 0; !sc.done() && steps < 64; steps++ {
		act := int(sc.byte()) % numActs
		channel := func() *rawChannel {
			i := int(sc.byte())
			if len(chans) == 0 {
				return nil
			}
			return chans[i%len(chans)]
		}
		switch act {
		case actCall:
			c := &uapi.Calls[int(sc.byte())%len(uapi.Calls)]
			msg := make([]byte, uapi.HeaderSize+c.CallSize())
			r.seq++
			uapi.Header{Request: c.Request, Seq: r.seq}.Encode(msg)
			copy(msg[uapi.HeaderSize:], sc.bytes(c.CallSize()))
			var fds []int
			for range c.FDsIn {
				fd := newMemfd(t, 64<<10, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
				defer unix.Close(fd)
				fds = append(fds, fd)
			}
			r.send(msg, fds...)
			reply, got := r.recv()
			h := uapi.DecodeHeader(reply)
			if h.Errno != uapi.OK {
				continue
			}
			switch c.Request {
			case uapi.IoctlAttach:
				r.kick = got[uapi.AttachFDKick]
			case uapi.IoctlChannelOpen:
				var open uapi.ChannelOpen
				_, err := uapi.DecodeReply(reply, len(got), &open)
				require.NoError(t, err, "CHANNEL_OPEN's reply does not decode")
				chans = append(chans, mapRawChannel(t, r, &open, got))
			}
		case actStore:
			ch, off, v := channel(), uint64(sc.u16())&^7, sc.u64()
			if ch != nil {
				word(ch.user, off%uint64(len(ch.user))).Store(v)
			}
		case actRing:
			ch, v := channel(), sc.u64()
			if ch != nil && r.kick >= 0 {
				ch.ring(v)
			}
		case actSlot:
			ch, i, desc := channel(), uint64(sc.byte()), sc.bytes(abi.CommandSize)
			if ch != nil {
				copy(ch.slot(i), desc)
			}
		case actKick:
			if r.kick >= 0 {
				one := [8]byte{1}
				unix.Write(r.kick, one[:])
			}
		case actHangUp:
			r.sock.Close()
			return
		}
	}
	r.sock.Close()
}

// sequenceSeeds are scripts a fuzzer grows from: the ordinary life of a
// client (VERSION, ATTACH, a channel, a NOP rung), and the same with a
// doorbell run backwards and a slot of garbage.
func sequenceSeeds() [][]byte {
	call := func(arg uapi.Arg) []byte {
		c, _ := uapi.Lookup(arg.Request())
		msg := uapi.EncodeCall(0, arg)
		return append([]byte{actCall, byte(uapi.Nr(c.Request))}, msg[uapi.HeaderSize:]...)
	}
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	nop := make([]byte, abi.CommandSize)
	(&abi.Command{Op: abi.OpNop, Seq: 0}).Encode(nop)
	var life []byte
	life = append(life, call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})...)
	life = append(life, call(&uapi.Attach{})...)
	life = append(life, call(&uapi.ChannelOpen{Engine: uint32(abi.EngineCopy), Priority: abi.PriorityNormal})...)
	life = append(life, call(&uapi.Alloc{Size: 1 << 20})...)
	withNop := append(append([]byte(nil), life...), append([]byte{actSlot, 0, 0}, nop...)...)
	withNop = append(withNop, append([]byte{actRing, 0}, u64(1)...)...)
	backwards := append(append([]byte(nil), withNop...), append([]byte{actRing, 0}, u64(0)...)...)
	garbage := append(append([]byte(nil), life...), append([]byte{actSlot, 0, 1}, make([]byte, abi.CommandSize)...)...)
	for i := range abi.CommandSize {
		garbage[len(garbage)-abi.CommandSize+i] = byte(i*37 + 11)
	}
	garbage = append(garbage, append([]byte{actRing, 0}, u64(2)...)...)
	garbage = append(garbage, actKick, actHangUp)
	return [][]byte{nil, life, withNop, backwards, garbage}
}

// mapRawChannel maps the channel a CHANNEL_OPEN's reply handed over, as
// rawConn.openChannel does, for a script to write into.
func mapRawChannel(t *testing.T, r *rawConn, open *uapi.ChannelOpen, fds []int) *rawChannel {
	t.Helper()
	user, err := unix.Mmap(fds[uapi.ChannelFDUser], 0, int(open.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err, "mapping channel %d's user memfd", open.Channel)
	t.Cleanup(func() { unix.Munmap(user) })
	status, err := unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(open.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err, "mapping channel %d's status memfd", open.Channel)
	t.Cleanup(func() { unix.Munmap(status) })
	size := uint64(open.RingSize)
	head := word(user, abi.RegDoorbell).Load()
	return &rawChannel{r: r, id: abi.Channel(open.Channel), size: size, mask: size - 1, user: user, status: status, head: head, next: head}
}
