//go:build exercise

package driver

// The checker of exercise 8.3, "Access counters" (book/stage8-managed.md):
//
//	go test -tags exercise -run Exercise8_3 ./driver
//
// The exercise turns the counters on with a field of Config,
//
//	AccessThreshold int // device accesses after which a remote page migrates; 0: migrate at the first fault
//
// which this file sets through reflection, so that it compiles before
// Config has it. It reads one managed page with the device, one command
// at a time, and looks where the page is (Resident) after each:
//
//   - after the first read, and after three, the page is mapped remotely,
//     not moved: fewer accesses than the threshold (8) leave it on the
//     host;
//   - after enough reads it is on the device: past the threshold it
//     migrates. The handler counts the accesses after the commands that
//     made them complete, so after each read the checker waits until the
//     handler has taken every record (RegFaultGet has reached
//     RegFaultPut), and allows 40 reads, five times the threshold, to get
//     there; it counts no time;
//   - every read sees the host's bytes, and a device write after the
//     migration reaches the host after Sync.

import (
	"encoding/binary"
	"reflect"
	"runtime"
	"testing"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

func TestExercise8_3(t *testing.T) {
	const threshold = 8
	cfg := Config{Prefetch: PrefetchOff}
	f := reflect.ValueOf(&cfg).Elem().FieldByName("AccessThreshold")
	if !f.IsValid() || f.Kind() != reflect.Int {
		t.Fatalf("driver.Config has no field AccessThreshold int: add it, and migrate a page the device uses only once it has been accessed that many times")
	}
	f.SetInt(threshold)
	d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 8 << 20}, cfg)
	m := allocManaged(t, c, 4096)
	fillPattern(m.Bytes(), 83)
	var want uint32
	for off := 0; off < 4096; off += 4 {
		want += binary.LittleEndian.Uint32(m.Bytes()[off:])
	}
	sum, err := c.Alloc(4096, abi.Page4K)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	read := func() {
		t.Helper()
		mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sum, Size: 4096})
		reads++
		// Let the handler take the records the read made before the
		// next look: it has, once it has stored RegFaultGet up to
		// RegFaultPut. (No time: a condition, checked between yields.)
		for d.regs.Load(abi.RegFaultGet) != d.regs.Load(abi.RegFaultPut) {
			runtime.Gosched()
		}
		if got := binary.LittleEndian.Uint32(readPA(d, paOf(t, c, sum), 4)); got != want {
			t.Fatalf("read %d: SUM32 of the page = %#x; want %#x, the host's bytes", reads, got, want)
		}
	}
	for reads < 3 {
		read()
		if dev, remote := m.Resident(); dev != 0 || remote != 1 {
			t.Fatalf("after %d device reads (threshold %d): Resident() = %d on the device, %d remote; want 0 and 1: a page used less than the threshold stays on the host, mapped remotely",
				reads, threshold, dev, remote)
		}
	}
	for {
		if dev, _ := m.Resident(); dev == 1 {
			break
		}
		if reads == 5*threshold {
			dev, remote := m.Resident()
			t.Fatalf("after %d device reads (threshold %d): Resident() = %d on the device, %d remote; want 1 on the device: past the threshold a page migrates",
				reads, threshold, dev, remote)
		}
		read()
	}
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: 4096, Value: 0x83})
	mustSync(t, m)
	for i, b := range m.Bytes()[:4096] {
		if b != 0x83 {
			t.Fatalf("after the migration, a device FILL and Sync: host byte %d = %#x; want 0x83", i, b)
		}
	}
}
