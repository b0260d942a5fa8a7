package device

import (
	"sync"
	"testing"
	"time"

	"softgpu/stage7-idle/abi"
)

// irqLog records the interrupts the device raises.
type irqLog struct {
	mu  sync.Mutex
	got []abi.Engine
}

func (l *irqLog) handler(e abi.Engine) {
	l.mu.Lock()
	l.got = append(l.got, e)
	l.mu.Unlock()
}

func (l *irqLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// waitFence waits until engine e's timeline reads want. run returns when the
// head moves; the engine writes the fence just after.
func waitFence(t *testing.T, d *Device, e abi.Engine, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for d.Registers().Load(abi.EngineRegs(e)+abi.RegFence) != want {
		if time.Now().After(deadline) {
			t.Fatalf("engine %v's fence timeline never reached %d (reads %d)", e, want, d.Registers().Load(abi.EngineRegs(e)+abi.RegFence))
		}
	}
}

func TestFencedCommandWritesTheTimeline(t *testing.T) {
	d := openTest(t, Config{})
	regs := d.Registers()
	bank := abi.EngineRegs(abi.EngineCopy)
	if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 42}); st != abi.StatusOK {
		t.Fatalf("fenced NOP = %v", st)
	}
	waitFence(t, d, abi.EngineCopy, 42)
	if cycles := regs.Load(bank + abi.RegFenceCycles); cycles == 0 || cycles > d.Clock().Now() {
		t.Errorf("RegFenceCycles = %d; want a moment between open and now (%d)", cycles, d.Clock().Now())
	}
	// A command that fails still completes, and its fence still signals.
	if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Flags: abi.FlagFence, Fence: 43, Dst: 1 << 40, Size: 1}); st != abi.StatusOutOfRange {
		t.Fatalf("fenced FILL out of range = %v", st)
	}
	waitFence(t, d, abi.EngineCopy, 43)
	// Without FlagFence the timeline stays where it was; a command refused
	// for undefined flags does not fence either, even with FlagFence set.
	run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Fence: 99})
	run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence | 0x80, Fence: 77})
	d.Close() // waits for the engines: anything they were going to write is written
	if got := regs.Load(bank + abi.RegFence); got != 43 {
		t.Errorf("RegFence after an unfenced and a refused command = %d; want 43 still", got)
	}
	if got := regs.Load(abi.EngineRegs(abi.EngineCompute) + abi.RegFence); got != 0 {
		t.Errorf("the compute engine's timeline moved to %d; fences are per engine", got)
	}
}

// TestInterruptArming checks when the line is raised, for every arm value.
func TestInterruptArming(t *testing.T) {
	const fenceIrq = abi.FlagFence | abi.FlagInterrupt
	tests := []struct {
		name   string
		arm    uint64
		target uint64
		cmds   []abi.Command
		want   int // interrupts raised
	}{
		{"off", abi.IrqOff, 0, []abi.Command{{Op: abi.OpNop, Flags: fenceIrq, Fence: 1}}, 0},
		{"every", abi.IrqEvery, 0, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 1},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 2},
			{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 3}, // no FlagInterrupt: no interrupt
		}, 2},
		{"target not reached", abi.IrqTarget, 5, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 3},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 4},
		}, 0},
		{"target reached once, then passed", abi.IrqTarget, 5, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 4},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 5},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 6},
		}, 2},
		{"target across the wrap", abi.IrqTarget, 1<<64 - 1, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 1<<64 - 2},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 0},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{})
			var log irqLog
			d.SetInterruptHandler(log.handler)
			bank := abi.EngineRegs(abi.EngineCompute)
			d.Registers().Store(bank+abi.RegIrqTarget, tt.target)
			d.Registers().Store(bank+abi.RegIrqArm, tt.arm)
			for _, c := range tt.cmds {
				if st := run(t, d, abi.EngineCompute, c); st != abi.StatusOK {
					t.Fatalf("%+v = %v", c, st)
				}
			}
			// run returns when the head moves; the interrupt is raised
			// after the fence, a moment later. Closing the device waits
			// for the engine, and so for any interrupt it was raising.
			d.Close()
			if got := log.count(); got != tt.want {
				t.Errorf("interrupts raised = %d; want %d", got, tt.want)
			}
			if got := d.Registers().Load(bank + abi.RegIrqCount); got != uint64(tt.want) {
				t.Errorf("RegIrqCount = %d; want %d", got, tt.want)
			}
			for _, e := range log.got {
				if e != abi.EngineCompute {
					t.Errorf("handler called for engine %v; want compute", e)
				}
			}
		})
	}
}
