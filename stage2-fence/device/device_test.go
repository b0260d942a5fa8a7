package device

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage2-fence/abi"
	"softgpu/stage2-fence/internal/leakcheck"
)

const testMem = 1 << 20

// openTest opens a device with testMem bytes of memory and closes it when
// the test ends; leakcheck then proves the engines are gone.
func openTest(t testing.TB, cfg Config) *Device {
	t.Helper()
	leakcheck.Check(t)
	if cfg.MemorySize == 0 {
		cfg.MemorySize = testMem
	}
	d, err := Open(cfg)
	require.NoError(t, err, "Open(%+v)", cfg)
	t.Cleanup(d.Close)
	return d
}

// run plays the driver's part of the ring protocol for one command and
// returns the engine's status. It is the protocol of driver.Submit without
// the lock (tests call it from one goroutine, and the ring is empty between
// calls).
func run(t testing.TB, d *Device, e abi.Engine, cmd abi.Command) abi.Status {
	t.Helper()
	desc := make([]byte, abi.CommandSize)
	cmd.Encode(desc)
	return runRaw(t, d, e, desc)
}

// runRaw is run for a descriptor given as bytes, reserved bytes and all.
func runRaw(t testing.TB, d *Device, e abi.Engine, desc []byte) abi.Status {
	t.Helper()
	regs := d.Registers()
	c := abi.DefaultChannel(e)
	doorbell := abi.DoorbellPage(c)
	index := regs.Load(doorbell + abi.RegDoorbell) // the tail this test stored last
	binary.LittleEndian.PutUint64(desc[abi.OffSeq:], index)
	copy(slot(d, c, index), desc)
	ringDoorbell(d, c, index+1)
	waitCompleted(t, d, c, index)
	return statusOf(d, c, index)
}

// slot returns the submission slot of channel c that holds index i.
func slot(d *Device, c abi.Channel, i uint64) []byte {
	mask := d.Registers().Load(abi.RegRingSize) - 1
	return d.Ring(c)[abi.SlotOffset(i, mask):][:abi.CommandSize]
}

// entry returns the index word of channel c's completion entry for index i.
func entry(d *Device, c abi.Channel, i uint64) uint64 {
	mask := d.Registers().Load(abi.RegRingSize) - 1
	return d.Completions(c)[abi.CompletionWord(i, mask)].Load()
}

// statusOf reads the status the engine published for index i. Call it only
// after the entry holds i.
func statusOf(d *Device, c abi.Channel, i uint64) abi.Status {
	mask := d.Registers().Load(abi.RegRingSize) - 1
	return abi.Status(d.Completions(c)[abi.CompletionWord(i, mask)+1].Load())
}

// waitCompleted spins until channel c's completion entry for index i holds
// i; a failure is a device that never answers, not a slow one.
func waitCompleted(t testing.TB, d *Device, c abi.Channel, i uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for polls := 1; entry(d, c, i) != i; polls++ {
		if polls%64 == 0 {
			runtime.Gosched() // the engines may need this core
			if time.Now().After(deadline) {
				t.Fatalf("%v: completion of %#x not written after 10 s (entry holds %#x)", c, i, entry(d, c, i))
			}
		}
	}
}

// ringDoorbell stores tail (a sequence number, or a ring's tail) to
// channel c's doorbell, as the driver does. Every doorbell in this
// package's tests goes through it.
func ringDoorbell(d *Device, c abi.Channel, tail uint64) {
	d.Registers().Store(abi.DoorbellPage(c)+abi.RegDoorbell, tail)
}

// pattern fills memory with a position-dependent pattern, so any stray write
// shows up when the whole arena is compared with its expected image.
func pattern(mem []byte) {
	for i := range mem {
		mem[i] = byte(i*7 + i>>8)
	}
}

func TestRegistersIdentifyTheDevice(t *testing.T) {
	d := openTest(t, Config{})
	assert.Equal(t, uint64(abi.DeviceID), d.Registers().Load(abi.RegID), "RegID; want %#x", uint64(abi.DeviceID))
	assert.Equal(t, uint64(testMem), d.Registers().Load(abi.RegMemSize), "RegMemSize")
}

func TestRegisterOffsetOutsideSpacePanics(t *testing.T) {
	d := openTest(t, Config{})
	for _, off := range []uint64{abi.RegSpaceSize, 3} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Load(%#x) did not panic", off)
				}
			}()
			d.Registers().Load(off)
		}()
	}
}

func TestOpenRejectsHugeMemory(t *testing.T) {
	_, err := Open(Config{MemorySize: MaxMemorySize + 1})
	assert.ErrorIs(t, err, ErrConfig, "Open(MemorySize=%d) error", uint64(MaxMemorySize+1))
}

// TestOpcodes runs each opcode on a patterned arena and compares the whole
// arena with a model of what the command should have done.
func TestOpcodes(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name   string
		engine abi.Engine
		cmd    abi.Command
		model  func(mem []byte) // applies the expected effect
	}{
		{"nop", abi.EngineCopy, abi.Command{Op: abi.OpNop}, func([]byte) {}},
		{"fill", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 1000, Size: 333, Value: 0x1ab},
			func(m []byte) { copy(m[1000:1333], bytes.Repeat([]byte{0xab}, 333)) }},
		{"fill on compute", abi.EngineCompute, abi.Command{Op: abi.OpFill, Dst: 0, Size: 1, Value: 9},
			func(m []byte) { m[0] = 9 }},
		{"fill of zero bytes", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: testMem, Size: 0, Value: 1},
			func([]byte) {}},
		{"fill to the last byte", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: testMem - 10, Size: 10, Value: 0},
			func(m []byte) { clear(m[testMem-10:]) }},
		{"copy", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 5000, Dst: 90000, Size: 4097},
			func(m []byte) { copy(m[90000:94097], m[5000:9097]) }},
		{"copy overlapping forward", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 100, Dst: 150, Size: 200},
			func(m []byte) { copy(m[150:350], m[100:300]) }},
		{"copy overlapping backward", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 150, Dst: 100, Size: 200},
			func(m []byte) { copy(m[100:300], m[150:350]) }},
		{"delay", abi.EngineCompute, abi.Command{Op: abi.OpDelay, Value: 1000}, func([]byte) {}},
		{"sum32", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 4096, Size: 4096, Dst: 8192},
			func(m []byte) {
				var s uint64
				for i := 4096; i < 8192; i += 4 {
					s += uint64(le.Uint32(m[i:]))
				}
				le.PutUint64(m[8192:], s)
			}},
		{"nop on compute", abi.EngineCompute, abi.Command{Op: abi.OpNop}, func([]byte) {}},
		{"delay on copy", abi.EngineCopy, abi.Command{Op: abi.OpDelay, Value: 1000}, func([]byte) {}},
		{"copy onto itself", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 640, Dst: 640, Size: 1000}, func([]byte) {}},
		{"copy of zero bytes", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: testMem, Dst: testMem, Size: 0}, func([]byte) {}},
		{"sum32 of zero bytes stores 0", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 64, Size: 0, Dst: 128},
			func(m []byte) { clear(m[128:136]) }},
		{"sum32 result inside its source", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 4096, Size: 64, Dst: 4096 + 16},
			func(m []byte) {
				var s uint64
				for i := 4096; i < 4096+64; i += 4 {
					s += uint64(le.Uint32(m[i:]))
				}
				le.PutUint64(m[4096+16:], s)
			}},
		{"add32 of zero bytes", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 64, Size: 0, Value: 1}, func([]byte) {}},
		{"add32 wraps", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 256, Size: 512, Value: 0xfffffff0},
			func(m []byte) {
				for i := 256; i < 768; i += 4 {
					le.PutUint32(m[i:], le.Uint32(m[i:])+0xfffffff0)
				}
			}},
	}
	d := openTest(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := d.Memory()
			pattern(mem)
			want := bytes.Clone(mem)
			tt.model(want)
			require.Equal(t, abi.StatusOK, run(t, d, tt.engine, tt.cmd), "%v", tt.cmd.Op)
			if i := firstDiff(mem, want); i >= 0 {
				t.Errorf("memory differs from the model at byte %d: got %#x, want %#x", i, mem[i], want[i])
			}
		})
	}
}

// TestBadCommands submits one command of every class of fault and checks
// the status and that not one byte of memory changed.
func TestBadCommands(t *testing.T) {
	const maxU = 1<<64 - 1
	tests := []struct {
		name   string
		engine abi.Engine
		cmd    abi.Command
		want   abi.Status
	}{
		{"zero opcode", abi.EngineCopy, abi.Command{}, abi.StatusBadOpcode},
		{"unknown opcode", abi.EngineCopy, abi.Command{Op: 0x7e, Dst: 0, Size: 64}, abi.StatusBadOpcode},
		{"copy on compute", abi.EngineCompute, abi.Command{Op: abi.OpCopy, Src: 0, Dst: 64, Size: 64}, abi.StatusWrongEngine},
		{"kernel on copy", abi.EngineCopy, abi.Command{Op: abi.OpAdd32, Dst: 0, Size: 64}, abi.StatusWrongEngine},
		{"undefined flag", abi.EngineCopy, abi.Command{Op: abi.OpFill, Flags: 0x04, Dst: 0, Size: 64}, abi.StatusBadFlags},
		{"fill past the end", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: testMem - 10, Size: 11}, abi.StatusOutOfRange},
		{"fill starting past the end", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: testMem + 1, Size: 0}, abi.StatusOutOfRange},
		{"fill size overflows", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 64, Size: maxU - 10}, abi.StatusOutOfRange},
		{"copy source out of range", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: testMem, Dst: 0, Size: 1}, abi.StatusOutOfRange},
		{"copy destination out of range", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: testMem - 1, Size: 2}, abi.StatusOutOfRange},
		{"copy destination overflows", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: maxU, Size: 2}, abi.StatusOutOfRange},
		{"sum32 misaligned source", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 2, Dst: 64, Size: 8}, abi.StatusMisaligned},
		{"sum32 odd size", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 0, Dst: 64, Size: 6}, abi.StatusMisaligned},
		{"sum32 misaligned result", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 0, Dst: 4, Size: 8}, abi.StatusMisaligned},
		{"sum32 result misaligned at the end", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 0, Dst: testMem - 4, Size: 8}, abi.StatusMisaligned},
		{"sum32 result out of range", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 0, Dst: testMem, Size: 8}, abi.StatusOutOfRange},
		{"add32 misaligned", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 1, Size: 4}, abi.StatusMisaligned},
		{"add32 out of range", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: testMem - 4, Size: 8}, abi.StatusOutOfRange},
		{"add32 odd size", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 0, Size: 6}, abi.StatusMisaligned},
		{"add32 size overflows", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: 64, Size: maxU - 31}, abi.StatusOutOfRange},
		{"sum32 size overflows", abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: 64, Dst: 0, Size: maxU - 31}, abi.StatusOutOfRange},
		{"copy source overflows", abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: maxU - 1, Dst: 0, Size: 4}, abi.StatusOutOfRange},
		{"flag on nop", abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: 0x80}, abi.StatusBadFlags},
		{"flag on delay", abi.EngineCompute, abi.Command{Op: abi.OpDelay, Flags: 0x40, Value: 1 << 40}, abi.StatusBadFlags},
		// Several faults at once: the first in execute's fixed order wins.
		{"wrong engine before bad flags", abi.EngineCompute, abi.Command{Op: abi.OpCopy, Flags: 0x10, Dst: maxU, Size: 2}, abi.StatusWrongEngine},
		{"bad flags before bad range", abi.EngineCopy, abi.Command{Op: abi.OpFill, Flags: 0x20, Dst: maxU, Size: 2}, abi.StatusBadFlags},
		{"misaligned before out of range", abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: testMem + 2, Size: 4}, abi.StatusMisaligned},
	}
	d := openTest(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := d.Memory()
			pattern(mem)
			want := bytes.Clone(mem)
			assert.Equal(t, tt.want, run(t, d, tt.engine, tt.cmd), "%v", tt.cmd.Op)
			if i := firstDiff(mem, want); i >= 0 {
				t.Errorf("a refused command changed byte %d: %#x → %#x", i, want[i], mem[i])
			}
		})
	}
	// The engines survived every bad command: a good one still runs.
	assert.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "NOP after the bad commands")
}

// TestReservedBytesMustBeZero sets each reserved byte of an otherwise good
// FILL in turn: each must be refused, and memory left alone.
func TestReservedBytesMustBeZero(t *testing.T) {
	d := openTest(t, Config{})
	good := make([]byte, abi.CommandSize)
	(&abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: 7}).Encode(good)
	var reserved []int
	for i := 2; i < abi.OffSeq; i++ {
		reserved = append(reserved, i)
	}
	for i := abi.OffFence + 8; i < abi.CommandSize; i++ {
		reserved = append(reserved, i)
	}
	for _, i := range reserved {
		mem := d.Memory()
		pattern(mem)
		want := bytes.Clone(mem)
		desc := bytes.Clone(good)
		desc[i] = 0xff
		assert.Equal(t, abi.StatusReserved, runRaw(t, d, abi.EngineCopy, desc), "FILL with reserved byte %d set", i)
		if j := firstDiff(mem, want); j >= 0 {
			t.Errorf("FILL with reserved byte %d set changed memory at %d", i, j)
		}
	}
	assert.Equal(t, abi.StatusOK, runRaw(t, d, abi.EngineCopy, good), "the same FILL with reserved bytes zero")
}

func TestDelayLastsItsCycles(t *testing.T) {
	d := openTest(t, Config{})
	const cycles = 2_000_000 // 2 ms at 1 GHz
	start := d.Registers().Load(abi.RegTimestamp)
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCompute, abi.Command{Op: abi.OpDelay, Value: cycles}), "DELAY")
	// A lower bound only: the engine may not finish early, but a slow
	// machine may take as long as it likes.
	if elapsed := d.Registers().Load(abi.RegTimestamp) - start; elapsed < cycles {
		t.Errorf("DELAY %d cycles completed after %d cycles", uint64(cycles), elapsed)
	}
}

// TestCloseAbortsALongDelay rings a DELAY of centuries, then closes the
// device: Close must return, and a DELAY the engine had started must report
// StatusAborted. The engine may stop before it fetches the command (then
// there is no completion to check), so the scenario is repeated, waiting
// longer each time, until one run has observed the aborted completion.
func TestCloseAbortsALongDelay(t *testing.T) {
	leakcheck.Check(t)
	c := abi.DefaultChannel(abi.EngineCompute)
	for attempt := 1; ; attempt++ {
		d, err := Open(Config{MemorySize: 1 << 16})
		require.NoError(t, err)
		regs := d.Registers()
		cmd := abi.Command{Op: abi.OpDelay, Seq: 0, Value: 1 << 62}
		cmd.Encode(slot(d, c, 0))
		ringDoorbell(d, c, 1)
		time.Sleep(time.Duration(attempt) * time.Millisecond)
		d.Close() // must return: the engine gives up the delay
		if n := len(leakcheck.RunningIn("(*Engine).execute")); n != 0 {
			t.Fatalf("%d engines still running a command after Close returned", n)
		}
		assert.Equal(t, uint64(abi.DeviceStopped), regs.Load(abi.RegDeviceState), "RegDeviceState after Close")
		if entry(d, c, 0) == 0 {
			assert.Equal(t, abi.StatusAborted, statusOf(d, c, 0), "DELAY cut short by Close")
			return
		}
		if attempt == 20 {
			t.Fatal("in 20 attempts the engine never started the DELAY before Close")
		}
	}
}

func TestEnginesWorkWithoutYielding(t *testing.T) {
	// With YieldEvery < 0 an engine only gives up its P when the Go
	// scheduler preempts it. Slow on two cores, but it must still work.
	d := openTest(t, Config{YieldEvery: -1})
	for range 3 {
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "NOP")
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
