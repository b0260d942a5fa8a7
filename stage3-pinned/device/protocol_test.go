package device

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage3-pinned/abi"
	"softgpu/stage3-pinned/internal/leakcheck"
	"softgpu/stage3-pinned/trace"
)

// waitFor polls cond for up to 10 s; a failure is a device that never
// answers, not a slow one.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 50*time.Microsecond, "after 10 s: %s", what)
}

// badDoorbell is a sequence of tails a driver stores into a channel's
// doorbell, for a ring of a given size: every tail but the last is one the
// protocol allows (its commands run), and the last is one it forbids.
type badDoorbell struct {
	name  string
	rings []uint64 // tails stored in turn; the last one faults
}

// badDoorbells are the tails the protocol forbids, for a ring of size
// slots: more than a ring ahead of the head, behind it, and a wrap.
func badDoorbells(size uint64) []badDoorbell {
	return []badDoorbell{
		{"a ring and one ahead", []uint64{size + 1}},
		{"four rings ahead", []uint64{4 * size}},
		{"goes back", []uint64{2, 1}},
		{"goes back to zero after a lap", []uint64{size, 0}},
		{"wraps", []uint64{1<<64 - 1}},
	}
}

// TestDoorbellOutOfProtocolFaultsItsChannel rings channels with tails the
// ring protocol forbids — one more than a ring ahead of the head, one that
// moves back behind it, a huge jump — and checks that the channel faults
// with the tail in RegChannelFaultValue, that no slot runs (no stale slot
// replayed, no garbage one), and that the other channel is still served.
func TestDoorbellOutOfProtocolFaultsItsChannel(t *testing.T) {
	const size = 8
	for _, tt := range badDoorbells(size) {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{RingSize: size})
			regs := d.Registers()
			bad := abi.DefaultChannel(abi.EngineCompute)
			status := abi.ChannelStatusPage(bad)
			mem := d.Memory()
			for i := range uint64(size) { // every slot holds a fill that would show
				(&abi.Command{Op: abi.OpFill, Dst: 64 * i, Size: 64, Value: 0xee, Seq: i}).Encode(slot(d, bad, i))
			}
			for i, tail := range tt.rings {
				if i < len(tt.rings)-1 {
					ringDoorbell(d, bad, tail)
					waitCompleted(t, d, bad, tail-1)
				}
			}
			pattern(mem)
			want := bytes.Clone(mem)
			last := tt.rings[len(tt.rings)-1]
			ringDoorbell(d, bad, last)
			waitFor(t, "the channel faulted", func() bool { return regs.Load(status+abi.RegChannelFault) != 0 })
			assert.Equal(t, abi.FaultDoorbell, abi.ChannelFault(regs.Load(status+abi.RegChannelFault)), "RegChannelFault")
			assert.Equal(t, last, regs.Load(status+abi.RegChannelFaultValue), "RegChannelFaultValue; want the bad tail %#x", last)
			if i := firstDiff(mem, want); i >= 0 {
				t.Errorf("a faulted channel's slot ran: byte %d changed", i)
			}
			assert.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "NOP on the other channel after the fault")
		})
	}
}

// TestControlStopStopsTheDevice: after ControlStop every engine publishes
// EngineStopped, then the device DeviceStopped, and a doorbell rung after
// that is never answered.
func TestControlStopStopsTheDevice(t *testing.T) {
	d := openTest(t, Config{})
	regs := d.Registers()
	require.Equal(t, uint64(abi.DeviceRunning), regs.Load(abi.RegDeviceState), "RegDeviceState of a fresh device")
	regs.Store(abi.RegControl, abi.ControlStop)
	waitFor(t, "the device stopped", func() bool { return regs.Load(abi.RegDeviceState) == abi.DeviceStopped })
	for e := range abi.Engine(abi.NumEngines) {
		assert.Equal(t, uint64(abi.EngineStopped), regs.Load(abi.EngineStatusPage(e)+abi.RegEngineState), "%v: RegEngineState", e)
	}
	c := abi.DefaultChannel(abi.EngineCopy)
	(&abi.Command{Op: abi.OpNop, Seq: 0}).Encode(slot(d, c, 0))
	ringDoorbell(d, c, 1)
	time.Sleep(10 * time.Millisecond)
	if got := entry(d, c, 0); abi.Completed(got, 0) {
		t.Errorf("a stopped device completed command 0 (entry %#x)", got)
	}
}

func TestTimestampIsTheClock(t *testing.T) {
	d := openTest(t, Config{})
	regs := d.Registers()
	a := regs.Load(abi.RegTimestamp)
	time.Sleep(2 * time.Millisecond)
	b := regs.Load(abi.RegTimestamp)
	if b-a < 2_000_000 {
		t.Errorf("RegTimestamp moved %d cycles in 2 ms; want at least 2,000,000 (1 GHz)", b-a)
	}
}

// TestOpenReportsMemoryItCannotReserve runs itself in a child process
// whose address space is limited to a little more than it uses, and opens
// a device far larger: Open must return ErrNoMemory, not kill the process.
func TestOpenReportsMemoryItCannotReserve(t *testing.T) {
	if os.Getenv("SOFTGPU_TEST_CHILD") == "nomemory" {
		limit := vmSize(t) + 1<<30
		if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
			t.Skip(err)
		}
		_, err := Open(Config{MemorySize: 8 << 30})
		require.ErrorIs(t, err, ErrNoMemory, "Open(8 GiB) under a %d-byte address-space limit", limit)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenReportsMemoryItCannotReserve$", "-test.v")
	cmd.Env = append(os.Environ(), "SOFTGPU_TEST_CHILD=nomemory")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child failed\n%s", out)
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child did not pass:\n%s", out)
	}
}

// vmSize reads the process's virtual size from /proc/self/status.
func vmSize(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmSize:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	t.Skip("no VmSize in /proc/self/status")
	return 0
}

// TestTraceRecordsCommands runs a few commands with tracing on and checks
// what the mechanism must produce: for each command a doorbell on its
// channel, then the command on its engine with its status, in order.
func TestTraceRecordsCommands(t *testing.T) {
	leakcheck.Check(t)
	buf := trace.New(64)
	d, err := Open(Config{MemorySize: testMem, Trace: buf})
	require.NoError(t, err)
	run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64})
	run(t, d, abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 1, Size: 4})
	d.Close()
	var got []string
	for _, ev := range buf.Events() {
		switch ev.Kind {
		case trace.KindDoorbell:
			got = append(got, "doorbell "+ev.Channel.String())
		case trace.KindCommand:
			got = append(got, ev.Op.String()+" "+ev.Engine.String()+" "+abi.Status(ev.Status).String())
			if ev.End < ev.Start {
				t.Errorf("%v ends before it starts", ev.Op)
			}
		}
	}
	want := []string{"doorbell channel 1", "FILL copy ok", "doorbell channel 0", "ADD32 compute misaligned address or size"}
	assert.Equal(t, strings.Join(want, "; "), strings.Join(got, "; "), "trace")
}
