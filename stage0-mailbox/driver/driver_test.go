package driver

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/device"
	"softgpu/stage0-mailbox/internal/leakcheck"
)

func openTest(t *testing.T) *Driver {
	t.Helper()
	leakcheck.Check(t)
	dev, err := device.Open(device.Config{MemorySize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(dev, 0)
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
	if err := d.Submit(abi.NumEngines, abi.Command{Op: abi.OpNop}); err == nil {
		t.Errorf("Submit to engine %d = nil; want an error", abi.NumEngines)
	}
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
		if err := d.CopyFromDevice(got, uint64(AllocBase+w*region)); err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte{byte(w*rounds + rounds - 1)}, region)
		if !bytes.Equal(got, want) {
			t.Errorf("worker %d's region holds %#x...; want its last fill %#x", w, got[0], want[0])
		}
	}
}

func TestCloseWithACommandInFlight(t *testing.T) {
	d := openTest(t)
	done := make(chan error, 1)
	go func() { done <- d.Submit(abi.EngineCompute, abi.Command{Op: abi.OpDelay, Value: 1 << 62}) }()
	time.Sleep(10 * time.Millisecond) // let it reach the engine; the outcome must be an error either way
	if err := d.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) && !errors.Is(err, abi.StatusAborted) {
			t.Errorf("Submit interrupted by Close = %v; want ErrClosed or StatusAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Submit still waiting 10 s after Close")
	}
}

func TestCallsAfterCloseFail(t *testing.T) {
	d := openTest(t)
	addr, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
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
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
}

func TestCopiesCheckTheirRange(t *testing.T) {
	d := openTest(t)
	const mem = 4 << 20
	tests := []struct {
		name string
		addr uint64
		n    int
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

func TestNewRejectsANonDevice(t *testing.T) {
	leakcheck.Check(t)
	dev, err := device.Open(device.Config{MemorySize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dev.Registers().Store(abi.RegID, 0xdead)
	if _, err := New(dev, 0); !errors.Is(err, ErrNoDevice) {
		t.Errorf("New on registers reading 0xdead = %v; want ErrNoDevice", err)
	}
}

// TestSequenceComparisonIsWrapSafe starts the mailbox just below 2^64 and
// submits across the wrap: a comparison written as completed >= seq would
// hang or return early here.
func TestSequenceComparisonIsWrapSafe(t *testing.T) {
	d := openTest(t)
	bank := abi.EngineRegs(abi.EngineCopy)
	const start = 1<<64 - 3
	// Put driver and device in the state they would reach after 2^64-3
	// commands: ring the doorbell with that sequence (the slot holds no
	// command yet, so the engine reports a bad opcode) and wait until the
	// engine has completed it, as Submit would have.
	d.lastSeq[abi.EngineCopy] = start
	d.regs.Store(bank+abi.RegDoorbell, start)
	for d.regs.Load(bank+abi.RegCompletedSeq) != start {
		time.Sleep(time.Microsecond)
	}
	for i := range 6 {
		if err := d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 8192, Size: 8, Value: uint64(i)}); err != nil {
			t.Fatalf("fill %d across the wrap: %v", i, err)
		}
		got := make([]byte, 8)
		d.CopyFromDevice(got, 8192)
		if got[0] != byte(i) {
			t.Fatalf("fill %d across the wrap: memory holds %d; Submit returned before the engine ran it", i, got[0])
		}
	}
	if got := d.regs.Load(bank + abi.RegCompletedSeq); got != 3 {
		t.Errorf("completed sequence after the wrap = %d; want 3", got)
	}
}
