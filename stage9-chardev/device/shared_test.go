package device

import (
	"encoding/binary"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
)

// clientView maps a shared channel's two memfds as a client in another
// process would, and returns the user and status mappings.
func clientView(t testing.TB, f ChannelFiles) (user, status []byte) {
	t.Helper()
	us, _ := f.User.Stat()
	ss, _ := f.Status.Stat()
	user, err := unix.Mmap(int(f.User.Fd()), 0, int(us.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	status, err = unix.Mmap(int(f.Status.Fd()), 0, int(ss.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(user); unix.Munmap(status) })
	return user, status
}

// clientSubmit does what a client does to submit cmd as index i: stores
// into its mapping of the ring, then a store to its mapping of the
// doorbell, then the need-wakeup check.
func clientSubmit(d *Device, c abi.Channel, user []byte, cmd abi.Command, i uint64) {
	mask := d.cfg.RingSize - 1
	cmd.Seq = i
	cmd.Encode(user[abi.RegPageSize+abi.SlotOffset(i, mask):])
	bell := (*[8]byte)(user[abi.RegDoorbell:])
	storeWord(bell, i+1)
	if e := d.owner[c].Load(); e != 0 && d.regs.Load(abi.EngineStatusPage(abi.Engine(e-1))+abi.RegNeedWakeup) != 0 {
		d.Wake(c)
	}
}

// TestASharedChannelRunsFromTheClientsPages: a channel shared with a
// client runs the commands the client stores into its own mapping of the
// ring and the doorbell, and the client sees the completion and the fence
// in its read-only mapping of the status memfd. The device's view and the
// client's are the same pages.
func TestASharedChannelRunsFromTheClientsPages(t *testing.T) {
	d := openTest(t, Config{Shared: true})
	const e, c = abi.EngineCopy, abi.Channel(5)
	files, err := d.Share(c, nil)
	require.NoError(t, err)
	defer files.User.Close()
	defer files.Status.Close()
	user, status := clientView(t, files)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, c, 1, 0)}), "runlist")
	start := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell)
	if got := binary.LittleEndian.Uint64(user[abi.RegDoorbell:]); got != start {
		t.Fatalf("the client's doorbell reads %#x; the device's %#x: not the same page", got, start)
	}
	mem := data(d)
	for k := range uint64(3 * d.cfg.RingSize) { // three laps: every slot and entry through the client's pages
		i := start + k
		clientSubmit(d, c, user, abi.Command{Op: abi.OpFill, Flags: abi.FlagFence, Fence: i + 1, Dst: 0x20000 + k%64, Size: 1, Value: uint64(k)}, i)
		waitCompleted(t, d, c, i)
		word := abi.RegPageSize + 8*abi.CompletionWord(i, d.cfg.RingSize-1)
		if got := binary.LittleEndian.Uint64(status[word:]); got != i {
			t.Fatalf("command %d: the client's completion entry reads %#x", i, got)
		}
		fence := wordAt(status, abi.RegFence) // written after the entry
		for deadline := time.Now().Add(10 * time.Second); fence.Load() != i+1; {
			if time.Now().After(deadline) {
				t.Fatalf("command %d: the client's fence reads %d after 10 s; want %d", i, fence.Load(), i+1)
			}
		}
		require.Equal(t, byte(k), mem[0x20000+k%64], "command %d did not fill its byte", i)
	}
}

// TestSharedPagesAreGuarded: the status memfd cannot be mapped writable,
// neither memfd can be shrunk (a shrunk ring would be SIGBUS in the
// device's process), a channel on a runlist cannot be shared, and one
// that is not shared cannot be unshared.
func TestSharedPagesAreGuarded(t *testing.T) {
	d := openTest(t, Config{Shared: true})
	plain := openVM(t, Config{MemorySize: testMem})
	_, err := plain.Share(9, nil)
	plain.Close()
	assert.ErrorIs(t, err, ErrShared, "sharing a channel of a device opened without Shared")
	const c = abi.Channel(9)
	files, err := d.Share(c, nil)
	require.NoError(t, err)
	defer files.User.Close()
	defer files.Status.Close()
	if _, err := unix.Mmap(int(files.Status.Fd()), 0, abi.RegPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EACCES) {
		t.Errorf("mapping the status memfd writable = %v; want EACCES", err)
	}
	for _, f := range []*os.File{files.User} {
		assert.ErrorIs(t, f.Truncate(0), unix.EPERM, "truncating %s; want EPERM (sealed)", f.Name())
	}
	if _, err := d.Share(c, nil); !errors.Is(err, ErrShared) {
		t.Errorf("sharing a shared channel again = %v; want ErrShared", err)
	}
	assert.ErrorIs(t, d.Unshare(abi.Channel(10)), ErrShared, "unsharing a channel never shared")
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, abi.EngineCopy, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(abi.EngineCopy), 1, 0), rlEntry(d, 11, 1, 0)}), "runlist")
	if _, err := d.Share(11, nil); !errors.Is(err, ErrShared) {
		t.Errorf("sharing a channel on a runlist = %v; want ErrShared", err)
	}
	pub, err := d.Public()
	require.NoError(t, err)
	defer pub.Close()
	if _, err := unix.Mmap(int(pub.Fd()), 0, PublicSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EACCES) {
		t.Errorf("mapping the public memfd writable = %v; want EACCES", err)
	}
	view, err := unix.Mmap(int(pub.Fd()), 0, PublicSize, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(view)
	if got := binary.LittleEndian.Uint64(view[abi.RegID:]); got != abi.DeviceID {
		t.Errorf("the public page's RegID reads %#x; want %#x", got, uint64(abi.DeviceID))
	}
}

// TestUnsharingCutsTheClientOff: once a channel is unshared, what its old
// client stores through its mapping — a doorbell far ahead, garbage in
// every slot — reaches nothing the device reads, and what its commands
// left — a fence timeline far ahead — is reset: the next owner of the
// channel starts from the doorbell and timeline the device chose, and
// runs its own commands only.
func TestUnsharingCutsTheClientOff(t *testing.T) {
	d := openTest(t, Config{Shared: true})
	const e, c = abi.EngineCopy, abi.Channel(6)
	files, err := d.Share(c, nil)
	require.NoError(t, err)
	defer files.User.Close()
	defer files.Status.Close()
	user, _ := clientView(t, files)
	def := rlEntry(d, abi.DefaultChannel(e), 1, 0)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{def, rlEntry(d, c, 1, 0)}), "runlist")
	start := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell)
	// A fence of the client's choosing, far ahead of any index.
	clientSubmit(d, c, user, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence, Fence: start + 1<<40}, start)
	waitCompleted(t, d, c, start)
	for d.regs.Load(abi.ChannelStatusPage(c)+abi.RegFence) != start+1<<40 {
	}
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{def}), "runlist without the channel")
	require.NoError(t, d.Unshare(c))
	// The old client writes on.
	for i := range len(user) {
		user[i] = 0xa5
	}
	if got := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell); got != start+1 {
		t.Fatalf("after Unshare the device's doorbell reads %#x; want the head, %#x", got, start+1)
	}
	if got := d.regs.Load(abi.ChannelStatusPage(c) + abi.RegFence); got != start+1 {
		t.Fatalf("after Unshare the fence timeline reads %#x, as the client left it; want the head, %#x", got, start+1)
	}
	// The next owner, in-process, runs a FILL from its own ring.
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{def, rlEntry(d, c, 1, 0)}), "runlist again")
	i := publish(d, c, abi.Command{Op: abi.OpFill, Dst: 0x30000, Size: 8, Value: 7})
	require.Equal(t, abi.StatusOK, await(t, d, c, i), "the next owner's FILL")
	time.Sleep(time.Millisecond) // let a stray command, if any, run
	if fault := d.regs.Load(abi.ChannelStatusPage(c) + abi.RegChannelFault); fault != 0 {
		t.Fatalf("the channel faulted after Unshare: %v", abi.ChannelFault(fault))
	}
	if got := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell); got != i+1 {
		t.Fatalf("the doorbell reads %#x after the next owner's command; want %#x", got, i+1)
	}
}

// TestASharedChannelsInterruptGoesToItsVector: a fence interrupt of a
// channel shared with a vector calls the vector — in the daemon, a futex
// wake of the client's waiters (FenceVector) — and leaves the device's line and the channel's bit in
// RegIrqChannels alone; the interrupt count still counts it.
func TestASharedChannelsInterruptGoesToItsVector(t *testing.T) {
	d := openTest(t, Config{Shared: true})
	const e, c = abi.EngineCopy, abi.Channel(12)
	var calls atomic.Int32
	files, err := d.Share(c, func() { calls.Add(1) })
	require.NoError(t, err)
	defer files.User.Close()
	defer files.Status.Close()
	user, _ := clientView(t, files)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, c, 1, 0)}), "runlist")
	storeWord((*[8]byte)(user[abi.RegIrqArm:]), uint64(abi.IrqEvery))
	start := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell)
	clientSubmit(d, c, user, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence | abi.FlagInterrupt, Fence: start + 1}, start)
	for deadline := time.Now().Add(10 * time.Second); calls.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the vector was not called in 10 s")
		}
	}
	if off, bit := abi.IrqChannelsReg(c); d.regs.Load(off)&bit != 0 {
		t.Errorf("the channel's bit in RegIrqChannels is set: the interrupt went to the line too")
	}
	if cause := d.regs.Load(abi.RegIrqCause); cause != 0 {
		t.Errorf("RegIrqCause holds %#x: the line was raised", cause)
	}
	if n := d.regs.Load(abi.ChannelStatusPage(c) + abi.RegIrqCount); n != 1 {
		t.Errorf("RegIrqCount reads %d; want 1", n)
	}
	assert.ErrorIs(t, d.Unshare(c), ErrShared, "Unshare of a listed channel")
}
