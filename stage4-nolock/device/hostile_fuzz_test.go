// A hostile client may write its slot while the engine decodes it: that
// is a data race by construction — the device's defence is that it reads
// the descriptor once and checks what it decoded, so a torn write is just
// another bad command. The race detector would rightly report it, so this file is
// built without it.

//go:build !race

package device

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage4-nolock/abi"
)

// FuzzHostileDriver plays a hostile driver against a running device. The
// fuzzer's bytes are a program of writes to one channel — the writes a
// client that owns that channel could make: its submission ring's bytes and
// its user (doorbell) page's registers, with any values. After the program the test
// checks that the device is still running and that a well-behaved driver
// on the other channel (the other engine's) is still served. A panic in an engine goroutine
// fails the fuzz run by crashing the process.
func FuzzHostileDriver(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0})
	// A FILL of A's first bytes through the window, then the doorbell.
	f.Add([]byte{0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 4, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, program []byte) {
		// Host memory the driver registered (A, in window entry 0) and
		// memory it did not (G): the hostile channel may reach A through
		// its commands, and must never reach G.
		a, aHost := mapHost(t, regionSize)
		g, _ := mapHost(t, regionSize)
		pattern(g)
		guard := bytes.Clone(g)
		d := openTest(t, Config{})
		give(t, d, a)
		register(d, 0, aHost, regionSize, busA)
		regs := d.Registers()
		hostile := abi.DefaultChannel(abi.EngineCompute)
		ring := d.Ring(hostile)
		userPage := abi.DoorbellPage(hostile)
		for len(program) >= 10 {
			op, arg, value := program[0], program[1], binary.LittleEndian.Uint64(program[2:10])
			program = program[10:]
			switch op % 2 {
			case 0: // eight bytes of the ring
				binary.LittleEndian.PutUint64(ring[(uint64(arg)*8)%uint64(len(ring)):], value)
			case 1: // a word of the user page: the doorbell, or any other
				regs.Store(userPage+uint64(arg)%(abi.RegPageSize/8)*8, value)
			}
		}
		// The well-behaved channel is served, whatever the other did.
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: 1}), "FILL on the well-behaved channel")
		require.Equal(t, uint64(abi.DeviceRunning), regs.Load(abi.RegDeviceState), "a client's writes stopped the device")
		d.Close()
		if i := firstDiff(g, guard); i >= 0 {
			t.Fatalf("host memory the driver never registered changed at byte %d", i)
		}
	})
}
