package server_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// A client's addresses and ids are its own: the same number in another
// client's commands or calls names the other client's things, or nothing.
// These tests put client A's memory in place and have client B aim at it
// every way it can — and then read A's memory back, byte by byte.

// pattern returns size bytes that differ per seed and per offset.
func pattern(seed byte, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = seed ^ byte(i*7+i>>11)
	}
	return b
}

// checkBytes fails the test if g's memory at p is not want.
func checkBytes(t testing.TB, who string, g *client.GPU, p client.Ptr, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	require.NoError(t, g.Read(got, p), "%s: Read", who)
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("%s: byte %d reads %#x; want %#x", who, i, got[i], want[i])
	}
}

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// firstNot returns the index of the first byte of b that is not v, or -1.
// (Not bytes.IndexFunc, which decodes runes: a byte of 0x80 or more that
// is v reads as utf8.RuneError, never as v.)
func firstNot(b []byte, v byte) int {
	for i, x := range b {
		if x != v {
			return i
		}
	}
	return -1
}

func TestAClientsCommandsCannotReachAnotherClientsMemory(t *testing.T) {
	s := serve(t, server.Config{})
	a, b := dial(t, s), dial(t, s)
	const size = 64 << 10
	// A has two buffers, B one: B's first address is likely A's first
	// (each context allocates from the same base), and A's second, past a
	// gap larger than everything B maps (its buffer and its 1 MiB staging
	// buffer), is an address B has not mapped at all.
	a1, err := a.Alloc(size)
	require.NoError(t, err)
	if _, err := a.Alloc(2<<20 - size); err != nil {
		t.Fatal(err)
	}
	a2, err := a.Alloc(size)
	require.NoError(t, err)
	if a2-a1 < 2<<20 {
		t.Fatalf("A's second buffer is at %#x, within 2 MiB of its first (%#x): B may map it", a2, a1)
	}
	want1, want2 := pattern(0xa1, size), pattern(0xa2, size)
	require.NoError(t, a.Write(a1, want1))
	require.NoError(t, a.Write(a2, want2))
	b1, err := b.Alloc(size)
	require.NoError(t, err)
	require.NoError(t, b.Fill(b1, size, 0xb1))
	// A's first address, in B's commands, is B's own memory (or nothing).
	if err := b.Fill(a1, size, 0xbb); err == nil {
		assert.Equal(t, b1, a1, "B's FILL of A's address %#x (B's own is %#x) succeeded", a1, b1)
		checkBytes(t, "B's memory at the address B filled", b, a1, bytes.Repeat([]byte{0xbb}, size))
	}
	checkBytes(t, "A's first buffer after B's FILL of its address", a, a1, want1)
	// A's second address is not mapped in B's context: the copies fault.
	assert.Error(t, b.Copy(b1, a2, size), "B's COPY from A's address %#x, unmapped in B's context, succeeded", a2)
	assert.Error(t, b.Fill(a2, size, 0xbb), "B's FILL of A's address %#x, unmapped in B's context, succeeded", a2)
	assert.Error(t, b.Copy(a2, b1, size), "B's COPY to A's address %#x, unmapped in B's context, succeeded", a2)
	checkBytes(t, "A's second buffer after B's commands", a, a2, want2)
	checkBytes(t, "A's first buffer after B's commands", a, a1, want1)
	// B's fault is B's: A goes on.
	require.NoError(t, a.Copy(a2, a1, size), "A's COPY after B faulted")
	checkBytes(t, "A's second buffer after A's own COPY", a, a2, want1)
}

func TestAClientCannotFreeOrCloseAnotherClientsThings(t *testing.T) {
	s := serve(t, server.Config{})
	a := dial(t, s)
	const size = 64 << 10
	p, err := a.Alloc(size)
	require.NoError(t, err)
	host, err := a.HostAlloc(size)
	require.NoError(t, err)
	want := pattern(0x5a, size)
	require.NoError(t, a.Write(p, want))
	b := dialRaw(t, s.Node())
	b.attach()
	own := b.openChannel(abi.EngineCopy)
	for _, arg := range []uapi.Arg{&uapi.Free{VA: uint64(p)}, &uapi.Free{VA: uint64(host.Ptr())},
		&uapi.HostUnregister{VA: uint64(host.Ptr())}, &uapi.HostUnregister{VA: uint64(p)}} {
		if errno, _ := b.call(arg); errno != uapi.ErrNoEntry {
			t.Errorf("B's %T naming A's address: %v; want %v", arg, errno, uapi.ErrNoEntry)
		}
	}
	// Every channel of the device but B's own: A's, the engines' default
	// ones, and those nobody holds.
	for id := range abi.Channel(abi.NumChannels) {
		if id == own.id {
			continue
		}
		if errno, _ := b.call(&uapi.ChannelClose{Channel: uint32(id)}); errno != uapi.ErrNoEntry {
			t.Errorf("B's CHANNEL_CLOSE of %v, not its own: %v; want %v", id, errno, uapi.ErrNoEntry)
		}
	}
	// A's channels, memory and registration all still work.
	checkBytes(t, "A's buffer", a, p, want)
	require.NoError(t, a.Copy(host.Ptr(), p, size), "A's COPY into its host buffer")
	if i := firstDiff(host.Bytes(), want); i >= 0 {
		t.Fatalf("A's host buffer byte %d reads %#x after the COPY; want %#x", i, host.Bytes()[i], want[i])
	}
	assert.NoError(t, a.Free(p), "A's FREE of its own buffer")
	assert.NoError(t, a.HostFree(host), "A's HostFree of its own buffer")
}

// TestACommandNamingAnotherContextIsRefused: a command's Ctx field is in
// bytes the client writes, so a raw client can name any context in it —
// another client's, or the driver's own context 0, which maps all device
// memory. The engine runs a channel's commands only in its own context.
func TestACommandNamingAnotherContextIsRefused(t *testing.T) {
	s := serve(t, server.Config{})
	a := dial(t, s)
	const size = 64 << 10
	p, err := a.Alloc(size)
	require.NoError(t, err)
	want := pattern(0x3c, size)
	require.NoError(t, a.Write(p, want))
	b := dialRaw(t, s.Node())
	b.attach()
	if b.ctx == a.Context() {
		t.Fatalf("A and B were both given context %d", b.ctx)
	}
	ch := b.openChannel(abi.EngineCopy)
	hostVA, host := b.hostRegister(size)
	for _, ctx := range []abi.Context{a.Context(), 0, b.ctx + 1, abi.MaxContexts - 1, 0xffff} {
		if ctx == b.ctx {
			continue
		}
		for _, cmd := range []abi.Command{
			{Op: abi.OpFill, Ctx: ctx, Dst: uint64(p), Size: size, Value: 0xee},
			{Op: abi.OpCopy, Ctx: ctx, Src: uint64(p), Dst: hostVA, Size: size},
			{Op: abi.OpCopy, Ctx: ctx, Src: hostVA, Dst: uint64(p), Size: size},
		} {
			i := ch.put(cmd)
			ch.ring(ch.next)
			assert.Equal(t, abi.StatusBadContext, ch.wait(i), "%v naming context %d on B's channel (B is context %d)", cmd.Op, ctx, b.ctx)
		}
	}
	if i := bytes.IndexFunc(host, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("B's host buffer byte %d reads %#x: a COPY in another context wrote it", i, host[i])
	}
	checkBytes(t, "A's buffer after B's commands naming other contexts", a, p, want)
	// The refusals did not fault B's context: its own command runs.
	i := ch.put(abi.Command{Op: abi.OpFill, Ctx: b.ctx, Dst: hostVA, Size: size, Value: 0x77})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(i), "B's FILL in its own context after the refusals")
	require.Equal(t, bytes.Repeat([]byte{0x77}, size), host, "B's FILL of its own host buffer did not fill it")
	require.NoError(t, a.Nop(client.Copy), "A's NOP after B's commands")
}
