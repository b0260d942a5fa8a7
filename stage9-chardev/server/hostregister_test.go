package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// HOST_REGISTER is the one call that hands the daemon memory the client
// still holds. The daemon maps only a memfd sealed against shrinking, and
// only as much of it as it has: anything else could turn an engine's copy
// into SIGBUS in the daemon.

func TestHostRegisterRefusesWhatItCannotTrust(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	r.attach()
	page := uint64(os.Getpagesize())
	regular, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	require.NoError(t, err)
	t.Cleanup(func() { regular.Close() })
	require.NoError(t, regular.Truncate(int64(page)))
	var pipe [2]int
	require.NoError(t, unix.Pipe2(pipe[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(pipe[0]); unix.Close(pipe[1]) })
	unsealed := newMemfd(t, page, 0)
	growOnly := newMemfd(t, page, unix.F_SEAL_GROW)
	sealed := newMemfd(t, page, unix.F_SEAL_SHRINK)
	t.Cleanup(func() { unix.Close(unsealed); unix.Close(growOnly); unix.Close(sealed) })
	tests := []struct {
		name string
		fd   int
		size uint64
	}{
		{"a regular file", int(regular.Fd()), page},
		{"a pipe", pipe[0], page},
		{"an unsealed memfd", unsealed, page},
		{"a memfd sealed against growing only", growOnly, page},
		{"more bytes than the memfd has", sealed, 2 * page},
		{"2^64-page bytes", sealed, -page},
		{"0 bytes", sealed, 0},
		{"a page less one byte", sealed, page - 1},
		{"a page and one byte", sealed, page + 1},
	}
	fds, maps := settledFDs(t), hostMappings(t) // settled: descriptors earlier tests dropped are closed by collections
	for _, tt := range tests {
		reg := uapi.HostRegister{Size: tt.size}
		if errno, _ := r.call(&reg, tt.fd); errno != uapi.ErrInval {
			t.Errorf("HOST_REGISTER of %s = %v; want %v", tt.name, errno, uapi.ErrInval)
		}
	}
	if got := openFDs(t); got > fds {
		t.Errorf("%d descriptors open after the refused registrations; want at most %d, as before", got, fds)
	}
	if got := hostMappings(t); got != maps {
		t.Errorf("%d host memory mappings after the refused registrations; want %d, as before", got, maps)
	}
	ci := uapi.ClientInfo{Index: 0}
	r.mustCall(&ci)
	assert.Equal(t, uint64(0), ci.HostMemory, "CLIENT_INFO says the client has %d bytes of host memory registered", ci.HostMemory)
	// And the one that is right is taken.
	reg := uapi.HostRegister{Size: page}
	if errno, _ := r.call(&reg, sealed); errno != uapi.OK {
		t.Errorf("HOST_REGISTER of a sealed memfd of a page = %v; want OK", errno)
	}
}

// TestASealedMemfdCannotBePulledFromUnderACopy: the point of the seal. A
// client that registered a memfd cannot shrink it, so the daemon's
// mapping stays whole; a hole punched in it reads as zeroes, not SIGBUS;
// and copies from it go on working.
func TestASealedMemfdCannotBePulledFromUnderACopy(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	r.attach()
	ch := r.openChannel(abi.EngineCopy)
	const size = 256 << 10
	fd := newMemfd(t, size, unix.F_SEAL_SHRINK)
	t.Cleanup(func() { unix.Close(fd) })
	src := mapMemfd(t, fd, size)
	for i := range src {
		src[i] = byte(i*13 + i>>9)
	}
	reg := uapi.HostRegister{Size: size}
	r.mustCall(&reg, fd)
	dstVA, dst := r.hostRegister(size)

	require.ErrorIs(t, unix.Ftruncate(fd, 0), unix.EPERM, "ftruncate to 0 of a registered memfd; want EPERM (the seal)")
	require.ErrorIs(t, unix.Ftruncate(fd, size/2), unix.EPERM, "ftruncate to half of a registered memfd; want EPERM (the seal)")
	copyAll := func() {
		t.Helper()
		i := ch.put(abi.Command{Op: abi.OpCopy, Ctx: r.ctx, Src: reg.VA, Dst: dstVA, Size: size})
		ch.ring(ch.next)
		require.Equal(t, abi.StatusOK, ch.wait(i), "COPY from the registered memfd")
	}
	copyAll()
	require.Equal(t, src, dst, "COPY from the registered memfd: the destination differs from the source")
	// A hole the client punches takes its pages back; the daemon's mapping
	// of them reads zeroes, as the client's does.
	require.NoError(t, unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, size/2), "punching a hole")
	copyAll()
	require.Equal(t, src, dst, "COPY after a hole was punched: the destination differs from the source")
	if i := bytes.IndexFunc(dst[:size/2], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("byte %d of the punched half reads %#x after the copy; want 0", i, dst[i])
	}
	var in uapi.Info
	if errno, _ := r.call(&in); errno != uapi.OK {
		t.Fatalf("INFO after the copies: %v", errno)
	}
}
