//go:build exercise

package driver

// The checker of exercise 8.4, "The burst's width" (book/stage8-managed.md):
//
//	go test -tags exercise -run Exercise8_4 ./driver
//
// The exercise makes the width of a fault burst a field of Config,
//
//	FaultBurst uint64 // bytes; zero means 2 MiB (a block); at most abi.MaxFaultBurst
//
// which New stores in RegFaultBurst. This file sets the field through
// reflection, so that it compiles before Config has it. What it checks is
// what the engine does with the width: a COPY out of 1 MiB of managed
// memory, prefetch off, faults in bursts of FaultBurst bytes, so that with
// 64 KiB it takes at least 16 batches (one burst cannot name a page past
// its 64 KiB) where the default 2 MiB takes one, each page still recorded
// four times (once per warp) and moved once, and the bytes copied whole. A
// width the engine cannot use — past abi.MaxFaultBurst, or not a whole
// number of pages — is refused by New with ErrConfig.

import (
	"errors"
	"reflect"
	"testing"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// burstConfig returns a Config with prefetch off and FaultBurst set to
// burst, or fails the test if Config has no such field.
func burstConfig(t *testing.T, burst uint64) Config {
	t.Helper()
	cfg := Config{Prefetch: PrefetchOff}
	f := reflect.ValueOf(&cfg).Elem().FieldByName("FaultBurst")
	if !f.IsValid() || f.Kind() != reflect.Uint64 {
		t.Fatalf("driver.Config has no field FaultBurst uint64: add it (bytes; zero means a 2 MiB block), and store it in RegFaultBurst")
	}
	f.SetUint(burst)
	return cfg
}

func TestExercise8_4(t *testing.T) {
	const size = 1 << 20
	const pages = size >> abi.PageShift
	burstConfig(t, 0) // one message, not one per case, on a Config without the field
	for _, tt := range []struct {
		name        string
		burst       uint64
		wantBatches uint64 // at least
		exactly     bool
	}{
		{"64KiB", 64 << 10, size / (64 << 10), false},
		{"default", 0, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 8 << 20}, burstConfig(t, tt.burst))
			want := uint64(2 << 20)
			if tt.burst != 0 {
				want = tt.burst
			}
			if got := d.regs.Load(abi.RegFaultBurst); got != want {
				t.Errorf("RegFaultBurst = %d with FaultBurst %d; want %d", got, tt.burst, want)
			}
			m := allocManaged(t, c, size)
			fillPattern(m.Bytes(), 84)
			dst, err := c.Alloc(size, abi.Page4K)
			if err != nil {
				t.Fatal(err)
			}
			before := d.ManagedStats()
			mustDo(t, cp, c, abi.Command{Op: abi.OpCopy, Src: m.VA(), Dst: dst, Size: size})
			s := d.ManagedStats()
			faults, batches := s.Faults-before.Faults, s.Batches-before.Batches
			if batches < tt.wantBatches || tt.exactly && batches != tt.wantBatches {
				t.Errorf("a COPY out of 1 MiB with FaultBurst %d faulted in %d batches; want %d (a burst names no page past its width)",
					tt.burst, batches, tt.wantBatches)
			}
			if faults != 4*pages {
				t.Errorf("%d records; want %d (four per page: one per warp)", faults, 4*pages)
			}
			if moved := s.ToDevice - before.ToDevice; moved != pages {
				t.Errorf("%d pages moved to the device; want %d, each once", moved, pages)
			}
			got := make([]byte, size)
			for off := uint64(0); off < size; off += 4096 {
				copy(got[off:], readPA(d, paOf(t, c, dst+off), 4096))
			}
			checkBytes(t, "the copied MiB", got, m.Bytes())
		})
	}
	for _, bad := range []uint64{abi.MaxFaultBurst + 4096, 6000} {
		dev, err := device.Open(device.Config{MemorySize: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(dev, burstConfig(t, bad))
		if err == nil {
			d.Close()
		}
		dev.Close()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("New with FaultBurst %d: err = %v; want ErrConfig (past abi.MaxFaultBurst, or not whole pages)", bad, err)
		}
	}
}
