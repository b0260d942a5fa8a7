package server_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// TestHostileClientsLeaveNothingBehind runs a battery of hostile clients
// against one daemon, one after another, and then holds the daemon's
// process to what it was before them: its goroutines, its descriptors,
// its mappings of client memory, and the device memory in use. Each
// hostile client is a subtest, so that everything the test itself opened
// for it is closed before the count.
func TestHostileClientsLeaveNothingBehind(t *testing.T) {
	s := serve(t, server.Config{WriteTimeout: 100 * time.Millisecond, Device: deviceConfig(32 << 20)})
	ctl := control(t, s.Node())
	// One well-behaved client first, so that whatever the daemon and the
	// client library start once (and keep) is in the baseline.
	t.Run("warm-up", func(t *testing.T) {
		g := dial(t, s)
		p, err := g.Alloc(4096)
		require.NoError(t, err)
		require.NoError(t, g.Write(p, make([]byte, 4096)))
	})
	waitClients(t, ctl, 1)
	fds := settledFDs(t)
	goroutines, maps, used := runtime.NumGoroutine(), hostMappings(t), info(t, ctl).MemoryUsed

	t.Run("malformed calls", func(t *testing.T) {
		r := dialRaw(t, s.Node())
		memfd := newMemfd(t, 4096, unix.F_SEAL_SHRINK)
		defer unix.Close(memfd)
		r.sendRecv([]byte{1, 2, 3})
		r.sendRecv(uapi.EncodeCall(1, &uapi.Info{}), memfd, memfd, memfd)
		r.sendRecv(append(uapi.EncodeCall(2, &uapi.Info{}), make([]byte, 300)...))
		r.negotiate()
		r.sendRecv(uapi.EncodeCall(3, &uapi.HostRegister{Size: 4096}))
		r.attach()
	})
	t.Run("dies holding memory, with commands in flight", func(t *testing.T) {
		r := dialRaw(t, s.Node())
		r.attach()
		va := r.alloc(1 << 20)
		var hosts []uint64
		for range 3 {
			h, _ := r.hostRegister(256 << 10)
			hosts = append(hosts, h)
		}
		for e := range abi.Engine(abi.NumEngines) {
			ch := r.openChannel(e)
			for k := range 64 {
				if e == abi.EngineCopy {
					ch.put(abi.Command{Op: abi.OpCopy, Ctx: r.ctx, Src: hosts[k%3], Dst: va, Size: 256 << 10})
				}
				ch.put(abi.Command{Op: abi.OpDelay, Ctx: r.ctx, Value: uint64(time.Millisecond)})
			}
			ch.ring(ch.next)
		}
		r.sock.Close()
	})
	t.Run("garbage ring and bad doorbells", func(t *testing.T) {
		r := dialRaw(t, s.Node())
		r.attach()
		garbage := r.openChannel(abi.EngineCopy)
		for i := range garbage.size {
			for j := range garbage.slot(i) {
				garbage.slot(i)[j] = byte(i*7 + uint64(j))
			}
		}
		garbage.ring(garbage.head + garbage.size)
		bad := r.openChannel(abi.EngineCompute)
		bad.ring(bad.head + 4*bad.size)
		waitFor(t, "the bad doorbell faulting its channel", func() (bool, string) {
			return bad.fault() == abi.FaultDoorbell, bad.fault().String()
		})
	})
	t.Run("never reads", func(t *testing.T) {
		r := dialRaw(t, s.Node())
		r.attach()
		r.openChannel(abi.EngineCopy)
		flood(t, r)
		waitClients(t, ctl, 1)
	})
	t.Run("closes without freeing", func(t *testing.T) {
		g, err := client.Dial(s.Node())
		require.NoError(t, err)
		p, err := g.Alloc(2 << 20)
		require.NoError(t, err)
		h, err := g.HostAlloc(1 << 20)
		require.NoError(t, err)
		_, err = g.CopyAsync(p, h.Ptr(), 1<<20)
		require.NoError(t, err)
		_, err = g.NewChannel(client.Copy, client.ChannelOptions{})
		require.NoError(t, err)
		g.Close()
	})
	t.Run("killed process", func(t *testing.T) {
		v := startChild(t, "victim", s.Node(), 0, 0)
		v.expect(t, "ready")
		v.cmd.Process.Signal(syscall.SIGKILL)
		v.cmd.Wait()
	})

	waitClients(t, ctl, 1)
	waitFor(t, "device memory in use back to its baseline", func() (bool, string) {
		got := info(t, ctl).MemoryUsed
		return got == used, fmt.Sprintf("%d bytes; %d before", got, used)
	})
	waitFor(t, "the daemon's goroutines back to their baseline", func() (bool, string) {
		got := runtime.NumGoroutine()
		return got <= goroutines, fmt.Sprintf("%d goroutines; %d before", got, goroutines)
	})
	waitFor(t, "the daemon's descriptors back to their baseline", func() (bool, string) {
		runtime.GC() // an exited child's pidfd is closed by a cleanup
		got := openFDs(t)
		return got == fds, fmt.Sprintf("%d open; %d before", got, fds)
	})
	waitFor(t, "the daemon's mappings of client memory back to their baseline", func() (bool, string) {
		runtime.GC() // the client library unmaps rings in cleanups
		got := hostMappings(t)
		return got == maps, fmt.Sprintf("%d mappings; %d before", got, maps)
	})
}

// settledFDs returns the count of open descriptors once garbage
// collection no longer changes it: descriptors dropped by earlier tests
// (the pidfds of exited children, above all) are closed by cleanups
// after a collection, and must not be counted in a baseline.
func settledFDs(t testing.TB) int {
	t.Helper()
	last := -1
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
		n := openFDs(t)
		if n == last {
			return n
		}
		last = n
	}
	t.Fatalf("the count of open descriptors did not settle in %v", patience)
	return 0
}
