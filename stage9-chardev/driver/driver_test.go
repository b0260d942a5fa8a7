package driver

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/internal/leakcheck"
)

// openTest opens a 4 MiB device and a driver on it with default settings.
func openTest(t testing.TB) *Driver {
	t.Helper()
	return openWith(t, device.Config{MemorySize: 4 << 20}, Config{})
}

// openBare opens a 64 KiB device with no driver on it, for the tests of
// what New makes of a device; it is closed when the test ends, and the
// test fails if it leaves a goroutine behind.
func openBare(t testing.TB) *device.Device {
	t.Helper()
	leakcheck.Check(t)
	dev, err := device.Open(device.Config{MemorySize: 1 << 16})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	return dev
}

// openWith opens a device with dcfg (1 MiB of memory unless it says
// otherwise) and a driver on it with cfg. Both are closed when the test
// ends, and the test fails if it leaves a goroutine behind. Every test
// helper that opens a driver goes through here.
func openWith(t testing.TB, dcfg device.Config, cfg Config) *Driver {
	t.Helper()
	leakcheck.Check(t)
	if dcfg.MemorySize == 0 {
		dcfg.MemorySize = 1 << 20
	}
	dev, err := device.Open(dcfg)
	require.NoError(t, err)
	d, err := New(dev, cfg)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestSubmitReportsTheDevicesStatus(t *testing.T) {
	d := openTest(t)
	tests := []struct {
		name string
		e    abi.Engine
		cmd  abi.Command
		want error // nil, or the abi.Status the error must wrap
	}{
		{"nop", abi.EngineCopy, abi.Command{Op: abi.OpNop}, nil},
		{"fill", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 4096, Size: 64, Value: 1}, nil},
		{"out of range", abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 4 << 20, Size: 1}, abi.StatusOutOfRange},
		{"wrong engine", abi.EngineCompute, abi.Command{Op: abi.OpCopy, Size: 1}, abi.StatusWrongEngine},
		{"bad opcode", abi.EngineCompute, abi.Command{Op: 0xee}, abi.StatusBadOpcode},
	}
	for _, tt := range tests {
		err := d.Submit(tt.e, tt.cmd)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: Submit = %v; want nil", tt.name, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("%s: Submit = %v; want an error wrapping %v", tt.name, err, tt.want)
		}
		var ce *CommandError
		if tt.want != nil && (!errors.As(err, &ce) || ce.Op != tt.cmd.Op || ce.Engine != tt.e) {
			t.Errorf("%s: Submit = %#v; want a *CommandError naming %v on %v", tt.name, err, tt.cmd.Op, tt.e)
		}
	}
	assert.Error(t, d.Submit(abi.NumEngines, abi.Command{Op: abi.OpNop}), "Submit to engine %d", abi.NumEngines)
}

// TestConcurrentSubmitters has several goroutines fill their own regions on
// both engines at once; under -race this also checks the lock discipline.
func TestConcurrentSubmitters(t *testing.T) {
	d := openTest(t)
	const workers, rounds, region = 6, 50, 512
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			base := uint64(AllocBase + w*region)
			for r := range rounds {
				e := abi.Engine(r % abi.NumEngines)
				if err := d.Submit(e, abi.Command{Op: abi.OpFill, Dst: base, Size: region, Value: uint64(w*rounds + r)}); err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := make([]byte, region)
	for w := range workers {
		require.NoError(t, d.CopyFromDevice(got, uint64(AllocBase+w*region)))
		want := bytes.Repeat([]byte{byte(w*rounds + rounds - 1)}, region)
		assert.Equal(t, want, got, "worker %d's region holds %#x...; want its last fill %#x", w, got[0], want[0])
	}
}

func TestCloseWithACommandInFlight(t *testing.T) {
	d := openTest(t)
	done := make(chan error, 1)
	go func() { done <- d.Submit(abi.EngineCompute, abi.Command{Op: abi.OpDelay, Value: 1 << 62}) }()
	time.Sleep(10 * time.Millisecond) // let it reach the engine; the outcome must be an error either way
	require.NoError(t, d.Close(), "Close")
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) && !errors.Is(err, abi.StatusAborted) {
			t.Errorf("Submit interrupted by Close = %v; want ErrClosed or StatusAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Submit still waiting 10 s after Close")
	}
}

// TestCloseWithManySubmitters closes the driver while eight goroutines
// submit on both engines, twenty times over: every Submit must return, each
// with success, ErrClosed or StatusAborted, and no goroutine may be left.
func TestCloseWithManySubmitters(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		d := openTest(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					cmd := abi.Command{Op: abi.OpFill, Dst: uint64(AllocBase + 64*w), Size: 64}
					if i%7 == 0 {
						cmd = abi.Command{Op: abi.OpDelay, Value: 20_000}
					}
					err := d.Submit(abi.Engine(i%abi.NumEngines), cmd)
					if err == nil {
						continue
					}
					if !errors.Is(err, ErrClosed) && !errors.Is(err, abi.StatusAborted) {
						errs <- fmt.Errorf("round %d, worker %d: Submit = %w", round, w, err)
					}
					return
				}
			})
		}
		time.Sleep(time.Duration(round%4) * time.Millisecond)
		d.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: submitters still blocked 10 s after Close", round)
		}
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestSubmitReturnsOnlyWhenTheEngineIsDone closes the driver under a long
// COPY. Whatever Submit returns, the engine must be finished with the
// command by then: a caller is entitled to free the memory it named.
func TestSubmitReturnsOnlyWhenTheEngineIsDone(t *testing.T) {
	d := openTest(t)
	const n = 2 << 20
	done := make(chan error, 1)
	go func() {
		done <- d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: n, Size: n})
	}()
	time.Sleep(100 * time.Microsecond)
	d.Close()
	<-done
	if n := len(leakcheck.RunningIn("(*Engine).execute")); n != 0 {
		t.Errorf("Submit returned while %d engines still ran a command", n)
	}
}

// TestNewOnAUsedDevice binds a second driver to a device that has already
// run commands: its first Submit must wait for its own command, not return
// on the previous driver's completion.
func TestNewOnAUsedDevice(t *testing.T) {
	leakcheck.Check(t)
	dev, err := device.Open(device.Config{MemorySize: 1 << 20})
	require.NoError(t, err)
	defer dev.Close()
	first, err := New(dev, Config{})
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, first.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}))
	}
	second, err := New(dev, Config{})
	require.NoError(t, err)
	require.NoError(t, second.Submit(abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 8192, Size: 4096, Value: 9}), "second driver's FILL")
	got := make([]byte, 4096)
	second.CopyFromDevice(got, 8192)
	assert.Equal(t, bytes.Repeat([]byte{9}, 4096), got, "second driver's FILL returned before the engine ran it")
	assert.ErrorIs(t, second.Submit(abi.EngineCopy, abi.Command{Op: 0xee}), abi.StatusBadOpcode, "second driver's bad opcode")
}

func TestCallsAfterCloseFail(t *testing.T) {
	d := openTest(t)
	addr, err := d.Alloc(64)
	require.NoError(t, err)
	d.Close()
	d.Close() // idempotent
	calls := map[string]error{
		"Submit":         d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}),
		"CopyToDevice":   d.CopyToDevice(addr, []byte{1}),
		"CopyFromDevice": d.CopyFromDevice(make([]byte, 1), addr),
		"Free":           d.Free(addr),
	}
	_, calls["Alloc"] = d.Alloc(64)
	for name, err := range calls {
		assert.ErrorIs(t, err, ErrClosed, "%s after Close", name)
	}
}

func TestCopiesCheckTheirRange(t *testing.T) {
	d := openTest(t)
	mem := d.MemorySize()
	tests := []struct {
		name string
		addr uint64
		n    uint64
		ok   bool
	}{
		{"whole memory", 0, mem, true},
		{"last byte", mem - 1, 1, true},
		{"empty at the end", mem, 0, true},
		{"one past the end", mem - 1, 2, false},
		{"overflowing address", 1<<64 - 1, 2, false},
	}
	for _, tt := range tests {
		buf := make([]byte, tt.n)
		for _, err := range []error{d.CopyToDevice(tt.addr, buf), d.CopyFromDevice(buf, tt.addr)} {
			if tt.ok && err != nil {
				t.Errorf("%s: copy of %d bytes at %#x = %v; want nil", tt.name, tt.n, tt.addr, err)
			}
			if !tt.ok && !errors.Is(err, abi.StatusOutOfRange) {
				t.Errorf("%s: copy of %d bytes at %#x = %v; want StatusOutOfRange", tt.name, tt.n, tt.addr, err)
			}
		}
	}
}

// TestEngineAndChannelIDsAreChecked: an engine or channel number the
// device does not have is an error from every call that takes one, never
// an index out of range.
func TestEngineAndChannelIDsAreChecked(t *testing.T) {
	d := openTest(t)
	for _, e := range []abi.Engine{abi.NumEngines, 255} {
		assert.ErrorIs(t, d.Submit(e, abi.Command{Op: abi.OpNop}), ErrNoEngine, "Submit(engine %d)", e)
		_, err := d.SubmitBatch(e, []abi.Command{{Op: abi.OpNop}})
		assert.ErrorIs(t, err, ErrNoEngine, "SubmitBatch(engine %d)", e)
	}
	for _, c := range []abi.Channel{abi.NumChannels, 1<<16 - 1} {
		_, err := d.Channel(c)
		assert.ErrorIs(t, err, ErrNoChannel, "Channel(%d)", c)
	}
}

// TestNewChecksTheRingSize: the ring size is read from RegRingSize, so New
// checks it against the rings the device hands over. A size that is not a
// power of two, or one that disagrees with the rings, is ErrNoDevice at New
// — not a slot index out of range in the first Submit.
func TestNewChecksTheRingSize(t *testing.T) {
	for _, size := range []uint64{0, 3, 4, 16, 1 << 40, 1 << 58, 1 << 63} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			leakcheck.Check(t)
			dev, err := device.Open(device.Config{MemorySize: 1 << 16, RingSize: 8})
			require.NoError(t, err)
			defer dev.Close()
			dev.Registers().Store(abi.RegRingSize, size)
			_, err = New(dev, Config{})
			assert.ErrorIs(t, err, ErrNoDevice, "New with RegRingSize %d and rings of 8", size)
		})
	}
}

func TestNewRejectsANonDevice(t *testing.T) {
	dev := openBare(t)
	dev.Registers().Store(abi.RegID, 0xdead)
	_, err := New(dev, Config{})
	assert.ErrorIs(t, err, ErrNoDevice, "New on registers reading 0xdead")
}

// TestSequenceComparisonIsWrapSafe starts the rings just below 2^64 and
// submits across the wrap, one command at a time and in a batch that
// straddles it behind a DELAY. abi.Completed's int64(entry-i) >= 0 is what
// holds here. Written as entry >= i, the wait for index 2^64-1 would return
// at once for the index 1 a lap later, or hang for a reused entry; the same
// cases below 2^32 catch an index narrowed to 32 bits anywhere on the way.
func TestSequenceComparisonIsWrapSafe(t *testing.T) {
	for _, boundary := range []struct {
		name string
		at   uint64 // the first index past the boundary, as a uint64 (0 for 2^64)
	}{{"2^64", 0}, {"2^32", 1 << 32}} {
		t.Run("one-by-one/across="+boundary.name, func(t *testing.T) {
			d := openWith(t, device.Config{RingSize: 4, Start: boundary.at - 3}, Config{})
			for i := range 6 {
				require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 8192, Size: 8, Value: uint64(i)}), "fill %d across the wrap", i)
				got := make([]byte, 8)
				d.CopyFromDevice(got, 8192)
				require.Equal(t, byte(i), got[0], "fill %d across the wrap: memory holds %d; Submit returned before the engine ran it", i, got[0])
			}
		})
		t.Run("batch/across="+boundary.name, func(t *testing.T) {
			d := openWith(t, device.Config{RingSize: 4, Start: boundary.at - 2}, Config{})
			cmds := []abi.Command{{Op: abi.OpDelay, Value: 2_000_000}} // 2 ms
			for i := range uint64(3) {
				cmds = append(cmds, abi.Command{Op: abi.OpFill, Dst: 8192 + 64*i, Size: 64, Value: 0xa0 + i})
			}
			p, err := d.SubmitBatch(abi.EngineCopy, cmds)
			require.NoError(t, err)
			require.NoError(t, p.Wait(), "batch across the wrap")
			got := make([]byte, 3*64)
			d.CopyFromDevice(got, 8192)
			for i := range 3 {
				if got[64*i] != byte(0xa0+i) || got[64*i+63] != byte(0xa0+i) {
					t.Errorf("fill %d of the batch: memory holds %#x; Wait returned before the engine ran it", i, got[64*i])
				}
			}
		})
	}
}

// TestUndefinedFlagsAreRefusedBeforeSubmitting: a command with a flag bit
// this stage does not define comes back as StatusBadFlags without reaching
// the device (the doorbell does not move).
func TestUndefinedFlagsAreRefusedBeforeSubmitting(t *testing.T) {
	d := openTest(t)
	doorbell := abi.DoorbellPage(abi.DefaultChannel(abi.EngineCopy))
	before := d.regs.Load(doorbell + abi.RegDoorbell)
	err := d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: 0x80})
	assert.ErrorIs(t, err, abi.StatusBadFlags, "Submit with flag 0x80")
	if after := d.regs.Load(doorbell + abi.RegDoorbell); after != before {
		t.Errorf("the doorbell moved from %d to %d: the command reached the device", before, after)
	}
}

// TestNewRefusesWhatItCannotDrive: a device that has stopped, and one whose
// channel an earlier driver left faulted, are refused with an error that
// says so — a new driver never serves a channel the device has given up.
func TestNewRefusesWhatItCannotDrive(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		dev := openBare(t)
		first, err := New(dev, Config{})
		require.NoError(t, err)
		first.Close()
		_, err = New(dev, Config{})
		assert.ErrorIs(t, err, ErrClosed, "New on a stopped device")
	})
	t.Run("faulted", func(t *testing.T) {
		dev := openBare(t)
		c := abi.DefaultChannel(abi.EngineCompute)
		dev.Registers().Store(abi.DoorbellPage(c)+abi.RegDoorbell, 1<<40) // out of protocol
		dev.Wake(c)                                                       // the engine may be asleep
		status := abi.ChannelStatusPage(c)
		waitUntil(t, "the channel faulted", func() bool { return dev.Registers().Load(status+abi.RegChannelFault) != 0 })
		_, err := New(dev, Config{})
		if !errors.Is(err, ErrChannelFaulted) || !errors.Is(err, abi.FaultDoorbell) {
			t.Errorf("New on a device with a faulted channel = %v; want ErrChannelFaulted wrapping FaultDoorbell", err)
		}
	})
	// A doorbell moved back behind what has run: the value a new driver
	// reads from it has completed already, so only the fault register says
	// the channel is dead — New must read it, or it attaches to a channel
	// the device will never serve again.
	t.Run("faulted behind its head", func(t *testing.T) {
		dev := openBare(t)
		first, err := New(dev, Config{})
		require.NoError(t, err)
		for range 2 { // two, so that what a new driver reads is behind a command that ran
			require.NoError(t, first.Submit(abi.EngineCompute, abi.Command{Op: abi.OpNop}))
		}
		c := abi.DefaultChannel(abi.EngineCompute)
		bell := abi.DoorbellPage(c) + abi.RegDoorbell
		dev.Registers().Store(bell, dev.Registers().Load(bell)-1) // the earlier driver's stray store
		dev.Wake(c)                                               // the engine may be asleep
		status := abi.ChannelStatusPage(c)
		waitUntil(t, "the channel faulted", func() bool { return dev.Registers().Load(status+abi.RegChannelFault) != 0 })
		_, err = New(dev, Config{})
		if !errors.Is(err, ErrChannelFaulted) || !errors.Is(err, abi.FaultDoorbell) {
			t.Errorf("New on a device with a channel faulted behind its head = %v; want ErrChannelFaulted wrapping FaultDoorbell", err)
		}
	})
}

// TestSubmitOnAFaultedChannel: a channel that faults under a driver fails
// its submissions with ErrChannelFaulted, at once, while the other channel
// keeps working.
func TestSubmitOnAFaultedChannel(t *testing.T) {
	d := openTest(t)
	c := abi.DefaultChannel(abi.EngineCompute)
	d.regs.Store(abi.DoorbellPage(c)+abi.RegDoorbell, 1<<40) // what a stray write could do
	d.hw.Wake(c)                                             // the engine may be asleep: a stray write wakes nothing
	waitUntil(t, "the channel faulted", func() bool { return d.regs.Load(abi.ChannelStatusPage(c)+abi.RegChannelFault) != 0 })
	assert.ErrorIs(t, d.Submit(abi.EngineCompute, abi.Command{Op: abi.OpNop}), ErrChannelFaulted, "Submit on the faulted channel")
	assert.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}), "Submit on the other channel")
}

// waitUntil polls cond for up to 10 s; a failure is a device that never
// answers, not a slow one.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Microsecond, "after 10 s: %s", what)
}
