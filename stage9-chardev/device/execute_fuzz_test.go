package device

import (
	"bytes"
	"testing"

	"softgpu/stage9-chardev/abi"
)

// FuzzExecute feeds the interpreter arbitrary 64-byte descriptors on either
// engine and checks its contract: it never panics, and it writes nothing
// outside the ranges the command names as destinations. (A command that
// faults part-way may have written the runs before the fault.) The engine under
// test is not the device's running one: the device's engines are stopped
// first, and the test drives a fresh Engine of its own, one command at a
// time.
func FuzzExecute(f *testing.F) {
	seed := func(c abi.Command, engine byte) {
		b := make([]byte, abi.CommandSize)
		c.Encode(b)
		f.Add(b, engine)
	}
	seed(abi.Command{Op: abi.OpFill, Dst: 100, Size: 300, Value: 7}, 1)
	seed(abi.Command{Op: abi.OpCopy, Src: 0, Dst: 64, Size: 4096}, 1)
	seed(abi.Command{Op: abi.OpCopy, Src: 4096, Dst: 0, Size: 1 << 63}, 1)
	seed(abi.Command{Op: abi.OpSum32, Src: 8, Dst: 16, Size: 64}, 0)
	seed(abi.Command{Op: abi.OpAdd32, Dst: 1<<16 - 4, Size: 8, Value: 1}, 0)
	seed(abi.Command{Op: abi.OpDelay, Value: 100}, 0)

	const memSize = 1 << 16
	d := openVM(f, Config{MemorySize: memSize})
	d.stop() // the device's own engines are gone; memory stays mapped until Close
	f.Cleanup(d.Close)
	engines := [abi.NumEngines]*Engine{newEngine(d, 0), newEngine(d, 1)}
	d.regs.Store(abi.RegControl, abi.ControlRun) // so a DELAY runs to its end

	f.Fuzz(func(t *testing.T, desc []byte, engine byte) {
		if len(desc) < abi.CommandSize {
			desc = append(desc, make([]byte, abi.CommandSize-len(desc))...)
		}
		cmd := abi.Decode(desc)
		if cmd.Op == abi.OpDelay && cmd.Value > 1_000_000 {
			t.Skip("a DELAY longer than 1 ms only waits")
		}
		e := engines[engine%abi.NumEngines]
		pattern(data(d))
		before := bytes.Clone(data(d))
		e.job.load(desc[:abi.CommandSize], 1)
		st := e.execute(&e.job)
		for i := range data(d) {
			if data(d)[i] != before[i] && !writable(cmd, st, uint64(i)) {
				t.Fatalf("%+v on %v (status %v) wrote byte %d, outside its destination", cmd, e.id, st, i)
			}
		}
	})
}

// writable reports whether cmd, which ended with st, may have changed the
// byte at addr: only a command that got as far as running can, and only
// inside the range it writes.
func writable(cmd abi.Command, st abi.Status, addr uint64) bool {
	inside := func(base, size uint64) bool { return addr >= base && addr-base < size }
	if st == abi.StatusBadOpcode || st == abi.StatusWrongEngine || st == abi.StatusBadFlags ||
		st == abi.StatusReserved || st == abi.StatusMisaligned || st == abi.StatusBadContext {
		return false // refused before it moved a byte
	}
	switch cmd.Op {
	case abi.OpFill, abi.OpCopy, abi.OpAdd32:
		return inside(cmd.Dst, cmd.Size)
	case abi.OpSum32:
		return inside(cmd.Dst, 8)
	}
	return false
}
