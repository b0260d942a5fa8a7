//go:build exercise

package driver

// The checker of exercise 8.2, "Read duplication" (book/stage8-managed.md):
//
//	go test -tags exercise -run Exercise8_2 ./driver
//
// The exercise turns duplication on with a field of Config,
//
//	ReadDuplicate bool // a page whose faults are all reads gets a read-only copy on the device
//
// which this file sets through reflection, so that it compiles before
// Config has it. It checks what duplication is for, through the handler's
// counters and the bytes, never a time:
//
//   - a device read moves a copy of each page to the device, and reading
//     again faults no more: the pages are resident;
//   - the host's copy stays good: Sync moves back none of the pages the
//     device only read (ToHost does not count them), and they are still
//     the host's bytes;
//   - the device's first write to a duplicated page faults (the copy on
//     the device was read-only) and then lands; the host's copy of that
//     page is now stale, so Sync moves that page, and only that page,
//     back, with the device's bytes;
//   - a page whose fault is a write moves as before, writable: a second
//     write faults no more.

import (
	"bytes"
	"reflect"
	"testing"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

func TestExercise8_2(t *testing.T) {
	cfg := Config{Prefetch: PrefetchOff}
	f := reflect.ValueOf(&cfg).Elem().FieldByName("ReadDuplicate")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		t.Fatalf("driver.Config has no field ReadDuplicate bool: add it, and give a page whose faults are all reads a read-only copy on the device")
	}
	f.SetBool(true)
	d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 8 << 20}, cfg)
	const pages = 4
	const size = pages << abi.PageShift
	m := allocManaged(t, c, size)
	fillPattern(m.Bytes(), 82)
	want := bytes.Clone(m.Bytes())
	sum, err := c.Alloc(4096, abi.Page4K)
	if err != nil {
		t.Fatal(err)
	}
	read := func() { mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sum, Size: size}) }

	s0 := d.ManagedStats()
	read()
	s1 := d.ManagedStats()
	if s1.Faults == s0.Faults || s1.ToDevice-s0.ToDevice != pages {
		t.Fatalf("the first device read: %d records, %d pages to the device; want some, and %d", s1.Faults-s0.Faults, s1.ToDevice-s0.ToDevice, pages)
	}
	if dev, _ := m.Resident(); dev != pages {
		t.Errorf("after a device read, Resident() = %d on the device; want %d", dev, pages)
	}
	read()
	if s2 := d.ManagedStats(); s2.Faults != s1.Faults {
		t.Errorf("the second device read faulted %d times; want 0: a duplicated page is resident", s2.Faults-s1.Faults)
	}

	s3 := d.ManagedStats()
	mustSync(t, m)
	s4 := d.ManagedStats()
	if moved := s4.ToHost - s3.ToHost; moved != 0 {
		t.Errorf("Sync after device reads only moved %d pages back to the host; want 0: the host's copy of a page the device only read is good", moved)
	}
	checkBytes(t, "the host's copy after device reads and a Sync", m.Bytes(), want)

	// The device reads again (Sync dropped its copies, or kept them:
	// either way it must see the host's bytes), then writes page 1.
	read()
	s5 := d.ManagedStats()
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + 4096, Size: 4096, Value: 0x5a})
	s6 := d.ManagedStats()
	if s6.Faults == s5.Faults {
		t.Errorf("the device's first write to a page it had only read did not fault; want a write fault that drops the host's copy (the device's was read-only)")
	}
	copy(want[4096:8192], bytes.Repeat([]byte{0x5a}, 4096))
	mustSync(t, m)
	s7 := d.ManagedStats()
	if moved := s7.ToHost - s6.ToHost; moved != 1 {
		t.Errorf("Sync after a device write to one of %d duplicated pages moved %d pages back; want 1, the written one", pages, moved)
	}
	checkBytes(t, "the host's copy after the device's write and a Sync", m.Bytes(), want)

	// A page whose first fault is a write moves writable.
	w := allocManaged(t, c, 4096)
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: w.VA(), Size: 4096, Value: 1})
	s8 := d.ManagedStats()
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: w.VA(), Size: 4096, Value: 2})
	if s9 := d.ManagedStats(); s9.Faults != s8.Faults {
		t.Errorf("a second write to a page whose fault was a write faulted %d times; want 0: it moved writable", s9.Faults-s8.Faults)
	}
	mustSync(t, w)
	checkBytes(t, "a page written twice by the device", w.Bytes(), bytes.Repeat([]byte{2}, 4096))
}
