package driver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of managed memory (managed.go, faults.go): data survives every
// trip between the host and the device, the handler batches, de-duplicates
// and prefetches as configured, eviction and the thrashing guard keep data
// intact, and bad input is refused. Every wait has a deadline: a replay the
// handler loses leaves a channel stalled for ever, and these tests must
// fail, not hang, on it.

// managedWait is how long a command on managed memory may take before the
// test calls its replay lost. It is far beyond any healthy run (which takes
// microseconds to milliseconds, under -race too).
const managedWait = 10 * time.Second

// do runs cmd on ch, in ch's context c, and waits for it, at most
// managedWait. It is safe to call from any goroutine (it does not touch
// the test).
func do(ch *Channel, c *Context, cmd abi.Command) error {
	cmd.Ctx = c.ID()
	p, err := ch.SubmitBatch([]abi.Command{cmd})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), managedWait)
	defer cancel()
	err = p.WaitContext(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%v on channel %d (dst %#x, size %d) not done after %v: lost replay? (%w)",
			cmd.Op, ch.id, cmd.Dst, cmd.Size, managedWait, err)
	}
	return err
}

// mustDo is do for the test's own goroutine.
func mustDo(t testing.TB, ch *Channel, c *Context, cmd abi.Command) {
	t.Helper()
	require.NoError(t, do(ch, c, cmd), "%v [%#x, +%d)", cmd.Op, cmd.Dst, cmd.Size)
}

// managedSetup opens a driver, a context and a channel on each engine.
func managedSetup(t testing.TB, dcfg device.Config, cfg Config) (d *Driver, c *Context, cp, cm *Channel) {
	t.Helper()
	d = openWith(t, dcfg, cfg)
	c = newContext(t, d)
	var err error
	if cp, err = d.NewChannel(abi.EngineCopy, c, ChannelOptions{}); err != nil {
		t.Fatal(err)
	}
	if cm, err = d.NewChannel(abi.EngineCompute, c, ChannelOptions{}); err != nil {
		t.Fatal(err)
	}
	return d, c, cp, cm
}

// allocManaged allocates size bytes of managed memory in c.
func allocManaged(t testing.TB, c *Context, size uint64) *Managed {
	t.Helper()
	m, err := c.AllocManaged(size)
	require.NoError(t, err, "AllocManaged(%d)", size)
	return m
}

func mustSync(t testing.TB, ms ...*Managed) {
	t.Helper()
	for _, m := range ms {
		require.NoError(t, m.Sync(), "Sync")
	}
}

// fillPattern writes a pattern that depends on seed and position.
func fillPattern(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// add32 adds v to every little-endian word of b, as ADD32 does.
func add32(b []byte, v uint32) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(b[i:])+v)
	}
}

// sum32 is SUM32's result over b.
func sum32(b []byte) uint64 {
	var s uint64
	for i := 0; i+4 <= len(b); i += 4 {
		s += uint64(binary.LittleEndian.Uint32(b[i:]))
	}
	return s
}

// checkBytes fails the test at the first byte where got differs from want.
func checkBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if i := managedDiff(got, want); i >= 0 {
		t.Fatalf("%s: byte %d (page %d, offset %d) = %#02x; want %#02x (len %d)",
			what, i, i>>abi.PageShift, i&(1<<abi.PageShift-1), got[i], want[i], len(got))
	}
}

// copyRound is one round of a stress goroutine's copy: the host writes s
// with a pattern from seed, the device COPYs s[off, off+length) into the
// same range of tt on channel cc, and after tt's Sync the host compares.
// It returns the offset, from off, of the first byte of tt that is not
// s's (-1: none); ok is false if a call failed, which it reports on t
// (through assert: stress goroutines are not the test's own).
func copyRound(t *testing.T, cc *Channel, c *Context, s, tt *Managed, seed, off, length uint64) (diff int, ok bool) {
	if !assert.NoError(t, s.Sync()) {
		return -1, false
	}
	fillPattern(s.Bytes(), seed)
	if !assert.NoError(t, do(cc, c, abi.Command{Op: abi.OpCopy, Src: s.VA() + off, Dst: tt.VA() + off, Size: length})) {
		return -1, false
	}
	if !assert.NoError(t, tt.Sync()) {
		return -1, false
	}
	return managedDiff(tt.Bytes()[off:off+length], s.Bytes()[off:off+length]), true
}

func managedDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

var policies = []Prefetch{PrefetchWindow, PrefetchOff, PrefetchAdaptive}

// TestManagedPageBoundaries: for every prefetch policy, the host writes
// managed memory, the device reads it (COPY, SUM32) and writes it (COPY,
// FILL, ADD32) at the same addresses, and the host reads the result after
// Sync — byte for byte what the commands say, and nothing outside their
// ranges changed. The ranges start and end at 4095, 4096 and 4097 and
// cross many pages, including the allocation's last, partial one.
func TestManagedPageBoundaries(t *testing.T) {
	const size = 24<<abi.PageShift + 123
	byteCases := []struct{ off, size uint64 }{
		{0, 4095}, {0, 4096}, {0, 4097}, {4095, 1}, {4095, 2}, {4096, 4096}, {4097, 8190},
		{4095, 5*4096 + 2}, {100, 20*4096 + 77}, {size - 4097, 4097}, {0, size},
	}
	wordCases := []struct{ off, size uint64 }{
		{4092, 4}, {4092, 8}, {4096, 4096}, {4100, 8188}, {4092, 10*4096 + 8}, {0, size &^ 3}, {(size - 4100) &^ 3, 4100 &^ 3},
	}
	for _, pol := range policies {
		t.Run(pol.String(), func(t *testing.T) {
			d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: pol})
			a, b := allocManaged(t, c, size), allocManaged(t, c, size)
			sumAt, err := c.Alloc(4096, abi.Page4K)
			require.NoError(t, err)
			for k, tc := range byteCases {
				mustSync(t, a, b) // the host is about to write pages the device may hold
				fillPattern(a.Bytes(), uint64(k))
				fillPattern(b.Bytes(), uint64(k)+1000)
				wantA, wantB := bytes.Clone(a.Bytes()), bytes.Clone(b.Bytes())
				mustDo(t, cp, c, abi.Command{Op: abi.OpCopy, Src: a.VA() + tc.off, Dst: b.VA() + tc.off, Size: tc.size})
				copy(wantB[tc.off:tc.off+tc.size], wantA[tc.off:])
				v := byte(0xc0 + k)
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: a.VA() + tc.off, Size: tc.size, Value: uint64(v)})
				copy(wantA[tc.off:tc.off+tc.size], bytes.Repeat([]byte{v}, int(tc.size)))
				mustSync(t, a, b)
				checkBytes(t, fmt.Sprintf("FILL [%d, +%d) then Sync", tc.off, tc.size), a.Bytes(), wantA)
				checkBytes(t, fmt.Sprintf("COPY [%d, +%d) then Sync", tc.off, tc.size), b.Bytes(), wantB)
			}
			for k, tc := range wordCases {
				mustSync(t, b)
				fillPattern(b.Bytes(), uint64(k)+2000)
				wantB := bytes.Clone(b.Bytes())
				addend := uint32(0x01010101 * (k + 1))
				mustDo(t, cm, c, abi.Command{Op: abi.OpAdd32, Dst: b.VA() + tc.off, Size: tc.size, Value: uint64(addend)})
				add32(wantB[tc.off:tc.off+tc.size], addend)
				mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: b.VA() + tc.off, Dst: sumAt, Size: tc.size})
				require.Equal(t, sum32(wantB[tc.off:tc.off+tc.size]), binary.LittleEndian.Uint64(readPA(d, paOf(t, c, sumAt), 8)), "SUM32 [%d, +%d) after ADD32", tc.off, tc.size)
				mustSync(t, b)
				checkBytes(t, fmt.Sprintf("ADD32 [%d, +%d) then Sync", tc.off, tc.size), b.Bytes(), wantB)
			}
			if s := d.ManagedStats(); s.Faults == 0 || s.ToDevice == 0 || s.ToHost == 0 || s.Replays == 0 {
				t.Errorf("ManagedStats = %+v; want faults, replays and pages moved both ways", s)
			}
		})
	}
}

// holdHandler takes um.mu, which the fault handler needs to serve a batch
// it has read, so that faults pile up in the buffer; it returns the count
// of records written so far and the function that lets the handler go.
func holdHandler(d *Driver) (put0 uint64, release func()) {
	d.um.mu.Lock()
	var once sync.Once
	return d.regs.Load(abi.RegFaultPut), func() { once.Do(d.um.mu.Unlock) }
}

// awaitRecords waits until the device has written n fault records since
// put0, at most managedWait.
func awaitRecords(t testing.TB, d *Driver, put0, n uint64) {
	t.Helper()
	deadline := time.Now().Add(managedWait)
	for d.regs.Load(abi.RegFaultPut)-put0 < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d fault records written after %v; want %d", d.regs.Load(abi.RegFaultPut)-put0, managedWait, n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestManagedFaultsAreBatched: eight channels on both engines, each on its
// own part of one allocation, fault at once, and every byte comes out
// right. The test holds the handler's lock until all eight records are in
// the buffer, so it cannot serve them one by one: the handler reads at
// most one batch before it blocks on the lock, and the rest form the
// next, so some batch has several records whatever the timing. Every batch
// has at least one record (no overflow here: 8 records in a ring of 128),
// so Faults > Batches must follow.
func TestManagedFaultsAreBatched(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	const part = 64 << 10
	const n = 8
	m := allocManaged(t, c, n*part)
	fillPattern(m.Bytes(), 1)
	want := bytes.Clone(m.Bytes())
	chs := make([]*Channel, n)
	cmds := make([]abi.Command, n)
	for i := range chs {
		e := abi.Engine(i % 2)
		ch, err := d.NewChannel(e, c, ChannelOptions{})
		require.NoError(t, err)
		chs[i] = ch
		off := uint64(i) * part
		if e == abi.EngineCopy {
			cmds[i] = abi.Command{Op: abi.OpFill, Dst: m.VA() + off, Size: part, Value: uint64(0x10 + i)}
			copy(want[off:off+part], bytes.Repeat([]byte{byte(0x10 + i)}, part))
		} else {
			cmds[i] = abi.Command{Op: abi.OpAdd32, Dst: m.VA() + off, Size: part, Value: uint64(i + 1)}
			add32(want[off:off+part], uint32(i+1))
		}
	}
	before := d.ManagedStats()
	put0, release := holdHandler(d)
	defer release()
	errs := make(chan error, n)
	for i := range chs {
		go func() { errs <- do(chs[i], c, cmds[i]) }()
	}
	awaitRecords(t, d, put0, n)
	release()
	for range n {
		assert.NoError(t, <-errs)
	}
	if t.Failed() {
		return
	}
	mustSync(t, m)
	checkBytes(t, "eight channels' parts", m.Bytes(), want)
	s := d.ManagedStats()
	faults, batches := s.Faults-before.Faults, s.Batches-before.Batches
	if faults <= batches || faults < n {
		t.Errorf("%d fault records in %d batches; want at least %d records, and more records than batches", faults, batches, n)
	}
}

// TestManagedDuplicateFaultsMoveOnce: two channels, one on each engine,
// read the same page at once, and both records are in the buffer before
// the handler may serve either. Whether the two land in one batch (and
// count as a duplicate) depends on timing; that the page moves to the
// device exactly once does not.
func TestManagedDuplicateFaultsMoveOnce(t *testing.T) {
	d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	m := allocManaged(t, c, 4<<abi.PageShift)
	fillPattern(m.Bytes(), 3)
	dst, err := c.Alloc(8192, abi.Page4K)
	require.NoError(t, err)
	const page = 2
	src := m.VA() + page<<abi.PageShift
	before := d.ManagedStats()
	put0, release := holdHandler(d)
	defer release()
	errs := make(chan error, 2)
	go func() { errs <- do(cp, c, abi.Command{Op: abi.OpCopy, Src: src, Dst: dst, Size: 4096}) }()
	go func() { errs <- do(cm, c, abi.Command{Op: abi.OpSum32, Src: src, Dst: dst + 4096, Size: 4096}) }()
	awaitRecords(t, d, put0, 2)
	release()
	for range 2 {
		require.NoError(t, <-errs)
	}
	pageBytes := m.Bytes()[page<<abi.PageShift:][:4096]
	checkBytes(t, "the copied page", readPA(d, paOf(t, c, dst), 4096), pageBytes)
	assert.Equal(t, sum32(pageBytes), binary.LittleEndian.Uint64(readPA(d, paOf(t, c, dst+4096), 8)), "SUM32 of the page")
	s := d.ManagedStats()
	if got := s.ToDevice - before.ToDevice; got != 1 {
		t.Errorf("ToDevice moved by %d for two faults on one page; want 1 (stats %+v)", got, s)
	}
	if got := s.Faults - before.Faults; got < 2 {
		t.Errorf("Faults moved by %d; want at least 2", got)
	}
	if dev, _ := m.Resident(); dev != 1 {
		t.Errorf("Resident() = %d pages on the device; want 1", dev)
	}
}

// TestManagedPrefetchWindow: the fixed window moves the aligned window of
// PrefetchPages around a fault, clipped to the pages that exist; PrefetchOff
// moves the faulting page alone.
func TestManagedPrefetchWindow(t *testing.T) {
	const pages = 40
	tests := []struct {
		name  string
		cfg   Config
		touch []int // pages faulted, in order
		want  []int // Resident() after each
	}{
		{"window/page 5", Config{Prefetch: PrefetchWindow, PrefetchPages: 16}, []int{5}, []int{16}},
		{"window/page 15", Config{Prefetch: PrefetchWindow, PrefetchPages: 16}, []int{15}, []int{16}},
		{"window/page 16", Config{Prefetch: PrefetchWindow, PrefetchPages: 16}, []int{16}, []int{16}},
		{"window/last partial", Config{Prefetch: PrefetchWindow, PrefetchPages: 16}, []int{39, 5}, []int{8, 24}},
		{"window/partial start", Config{Prefetch: PrefetchWindow, PrefetchPages: 16}, []int{33}, []int{8}},
		{"off", Config{Prefetch: PrefetchOff, PrefetchPages: 16}, []int{5, 6, 39}, []int{1, 2, 3}},
		{"adaptive/first fault", Config{Prefetch: PrefetchAdaptive, PrefetchPages: 16}, []int{30}, []int{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, tt.cfg)
			m := allocManaged(t, c, pages<<abi.PageShift)
			for k, p := range tt.touch {
				before := d.ManagedStats()
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + uint64(p)<<abi.PageShift + 100, Size: 1, Value: 1})
				dev, remote := m.Resident()
				if dev != tt.want[k] || remote != 0 {
					t.Fatalf("after a fault on page %d: Resident() = %d, %d; want %d, 0", p, dev, remote, tt.want[k])
				}
				prev := 0
				if k > 0 {
					prev = tt.want[k-1]
				}
				if moved := d.ManagedStats().ToDevice - before.ToDevice; moved != uint64(tt.want[k]-prev) {
					t.Errorf("a fault on page %d moved %d pages (ToDevice); want %d", p, moved, tt.want[k]-prev)
				}
			}
			mustSync(t, m)
			for _, p := range tt.touch {
				assert.Equal(t, byte(1), m.Bytes()[p<<abi.PageShift+100], "page %d's byte after Sync", p)
			}
			if dev, _ := m.Resident(); dev != 0 {
				t.Errorf("Resident() after Sync = %d; want 0", dev)
			}
		})
	}
}

// TestManagedAdaptivePrefetchGrows: the device writes a byte of every
// page of 1 MiB of managed memory in address order, one FILL per page (a
// one-byte FILL faults on its page alone: its burst, device/burst.go, has
// nothing more to look at). That faults once per 16-page window with the
// fixed window (16 times) and fewer times with the adaptive one, whose
// window doubles while the faults follow on. The data is right with both.
func TestManagedAdaptivePrefetchGrows(t *testing.T) {
	const size = 1 << 20
	faults := map[Prefetch]uint64{}
	for _, pol := range []Prefetch{PrefetchWindow, PrefetchAdaptive} {
		t.Run(pol.String(), func(t *testing.T) {
			d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 8 << 20}, Config{Prefetch: pol, PrefetchPages: 16})
			m := allocManaged(t, c, size)
			fillPattern(m.Bytes(), 5)
			want := bytes.Clone(m.Bytes())
			for off := uint64(0); off < size; off += 4096 {
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + off + 7, Size: 1, Value: 0xee})
				want[off+7] = 0xee
			}
			faults[pol] = d.ManagedStats().Faults
			if dev, _ := m.Resident(); dev != size>>abi.PageShift {
				t.Errorf("Resident() = %d; want %d", dev, size>>abi.PageShift)
			}
			mustSync(t, m)
			checkBytes(t, "the MiB after a FILL per page", m.Bytes(), want)
		})
	}
	if t.Failed() {
		return
	}
	assert.Equal(t, uint64(size>>abi.PageShift/16), faults[PrefetchWindow], "the fixed window took %d faults for 1 MiB, one per window", faults[PrefetchWindow])
	if faults[PrefetchAdaptive] >= faults[PrefetchWindow] {
		t.Errorf("the adaptive window took %d faults; want fewer than the fixed window's %d", faults[PrefetchAdaptive], faults[PrefetchWindow])
	}
}

// TestManagedOversubscription: managed memory of 1.5 times what the driver
// can allocate is written by the host, added to, copied and filled in
// full by the device, and comes back byte for byte; pages were evicted
// on the way. The two-allocation case separates "eviction works" from
// "one allocation larger than memory evicts its own pages".
func TestManagedOversubscription(t *testing.T) {
	for _, parts := range []int{1, 2} {
		t.Run(fmt.Sprintf("allocations=%d", parts), func(t *testing.T) {
			d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 2 << 20}, Config{})
			total := d.DataSize() * 3 / 2
			each := total / uint64(parts) &^ (8<<abi.PageShift - 1)
			var ms []*Managed
			for range parts {
				ms = append(ms, allocManaged(t, c, each))
			}
			wants := make([][]byte, parts)
			for k, m := range ms {
				fillPattern(m.Bytes(), uint64(10+k))
				wants[k] = bytes.Clone(m.Bytes())
			}
			// Every allocation is worked on before any is synced, so
			// the later ones need the frames the earlier ones hold.
			half := each / 2
			for k, m := range ms {
				mustDo(t, cm, c, abi.Command{Op: abi.OpAdd32, Dst: m.VA(), Size: each, Value: 0x01020304})
				add32(wants[k], 0x01020304)
			}
			for k, m := range ms {
				mustDo(t, cp, c, abi.Command{Op: abi.OpCopy, Src: m.VA(), Dst: m.VA() + half, Size: half})
				copy(wants[k][half:], wants[k][:half])
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + 4095, Size: half / 2, Value: 0xee})
				copy(wants[k][4095:], bytes.Repeat([]byte{0xee}, int(half/2)))
			}
			for k, m := range ms {
				mustSync(t, m)
				checkBytes(t, fmt.Sprintf("allocation %d of %d bytes (device data %d)", k, each, d.DataSize()), m.Bytes(), wants[k])
			}
			t.Logf("stats %+v", d.ManagedStats())
			if s := d.ManagedStats(); s.Evicted == 0 {
				t.Errorf("ManagedStats = %+v; want Evicted > 0 with %d bytes managed on %d bytes of device data", s, total, d.DataSize())
			}
		})
	}
}

// TestManagedThrashingGuard: a page the device and the host pass back and
// forth in quick succession is mapped remotely after ThrashThreshold moves,
// and the data stays right; with the guard off nothing goes remote.
//
// "Quick" is thrashLapse, 500 µs of device clock between two moves. One
// round (Sync, a FILL that faults, the handler's migration) takes a few
// tens of microseconds, and the guard needs only two rounds in a row under
// that; the test allows 200 rounds, so a slow machine or -race cannot make
// it flake. With the guard off the outcome does not depend on timing.
func TestManagedThrashingGuard(t *testing.T) {
	for _, threshold := range []int{2, -1} {
		t.Run(fmt.Sprintf("threshold=%d", threshold), func(t *testing.T) {
			d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff, ThrashThreshold: threshold})
			m := allocManaged(t, c, 2<<abi.PageShift)
			sawRemote := false
			rounds := 200
			if threshold < 0 {
				rounds = 50
			}
			for i := range rounds {
				v := byte(i + 1)
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + 4000, Size: 200, Value: uint64(v)}) // both pages
				if _, remote := m.Resident(); remote > 0 {
					sawRemote = true
				}
				mustSync(t, m)
				if got := m.Bytes()[4000:4200]; !bytes.Equal(got, bytes.Repeat([]byte{v}, 200)) {
					t.Fatalf("round %d: the host reads %v...; want %d", i, got[:8], v)
				}
				m.Bytes()[4096] = 0 // a host write, after Sync, that the next FILL must overwrite
				if threshold > 0 && sawRemote && d.ManagedStats().Thrashing > 0 && i > 20 {
					break
				}
			}
			s := d.ManagedStats()
			if threshold > 0 && (!sawRemote || s.Thrashing == 0) {
				t.Errorf("after %d rounds: saw remote pages %v, stats %+v; want remote pages and Thrashing > 0", rounds, sawRemote, s)
			}
			if threshold < 0 && (sawRemote || s.Thrashing != 0) {
				t.Errorf("guard off: saw remote pages %v, Thrashing %d; want none", sawRemote, s.Thrashing)
			}
		})
	}
}

// TestManagedFaultsOutsideManagedMemory: an access to an address of the
// context that nothing maps, or to a managed allocation after Free, fails
// with the fault (FaultUnmapped) and migrates nothing.
func TestManagedFaultsOutsideManagedMemory(t *testing.T) {
	d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{})
	live := allocManaged(t, c, 4<<abi.PageShift)
	freed := allocManaged(t, c, 4<<abi.PageShift)
	freedVA := freed.VA()
	require.NoError(t, freed.Free())
	unmapped := live.VA() + 256<<20
	tests := []struct {
		name string
		ch   *Channel
		cmd  abi.Command
		va   uint64
	}{
		{"unmapped, write", cp, abi.Command{Op: abi.OpFill, Dst: unmapped, Size: 8}, unmapped},
		{"freed, write", cp, abi.Command{Op: abi.OpFill, Dst: freedVA + 4096, Size: 8}, freedVA + 4096},
		{"freed, read", cm, abi.Command{Op: abi.OpSum32, Src: freedVA, Dst: live.VA(), Size: 8}, freedVA},
		{"freed, add", cm, abi.Command{Op: abi.OpAdd32, Dst: freedVA + 8192, Size: 8}, freedVA + 8192},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := d.ManagedStats()
			err := do(tt.ch, c, tt.cmd)
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("%s = %v; want a *CommandError", tt.name, err)
			}
			var fe *FaultError
			if !errors.As(c.Err(), &fe) || fe.Fault&0xff != abi.FaultUnmapped || fe.VA != tt.va {
				t.Errorf("context error = %v; want a *FaultError at %#x, FaultUnmapped", c.Err(), tt.va)
			}
			if s := d.ManagedStats(); s.ToDevice != before.ToDevice {
				t.Errorf("ToDevice moved from %d to %d; want no migration", before.ToDevice, s.ToDevice)
			}
			c.ClearFault()
		})
	}
	// The context still works, and so does the live allocation.
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: live.VA(), Size: 4 << abi.PageShift, Value: 7})
	mustSync(t, live)
	checkBytes(t, "the live allocation", live.Bytes(), bytes.Repeat([]byte{7}, 4<<abi.PageShift))
}

// TestManagedBadInput: every misuse is refused with ErrManaged or
// ErrConfig, and nothing is half done.
func TestManagedBadInput(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 4 << 20}, Config{})
	c := newContext(t, d)
	for _, size := range []uint64{0, MaxManaged + 1, 1 << 63} {
		if m, err := c.AllocManaged(size); !errors.Is(err, ErrManaged) {
			t.Errorf("AllocManaged(%d) = %v, %v; want ErrManaged", size, m, err)
		}
	}
	if m, err := d.DefaultContext().AllocManaged(4096); !errors.Is(err, ErrManaged) {
		t.Errorf("AllocManaged on context 0 = %v, %v; want ErrManaged", m, err)
	}
	const size = 3*4096 + 10
	m := allocManaged(t, c, size)
	for _, r := range []struct{ off, size uint64 }{
		{0, 0}, {size, 1}, {size - 1, 2}, {0, size + 1}, {size + 1, 0}, {1 << 63, 1 << 63}, {^uint64(0), 2}, {1, ^uint64(0)},
	} {
		for _, to := range []Location{ToDevice, ToHost} {
			if mg, err := m.Prefetch(r.off, r.size, to); !errors.Is(err, ErrManaged) {
				t.Errorf("Prefetch(%d, %d, %v) = %v, %v; want ErrManaged", r.off, r.size, to, mg, err)
			}
		}
	}
	for _, to := range []Location{0, 3, -1} {
		if mg, err := m.Prefetch(0, 1, to); !errors.Is(err, ErrManaged) {
			t.Errorf("Prefetch(0, 1, %v) = %v, %v; want ErrManaged", to, mg, err)
		}
	}
	mg, err := m.Prefetch(size-1, 1, ToDevice) // the last byte: fine
	require.NoError(t, err, "Prefetch of the last byte")
	if err := mg.Wait(); err != nil || mg.Pages() != 1 {
		t.Errorf("Prefetch of the last byte: Wait = %v, Pages = %d; want nil, 1", err, mg.Pages())
	}
	require.NoError(t, m.Free(), "Free")
	assert.ErrorIs(t, m.Free(), ErrManaged, "second Free")
	assert.ErrorIs(t, m.Sync(), ErrManaged, "Sync after Free")
	if mg, err := m.Prefetch(0, 1, ToDevice); !errors.Is(err, ErrManaged) {
		t.Errorf("Prefetch after Free = %v, %v; want ErrManaged", mg, err)
	}
	for _, cfg := range []Config{{Prefetch: 7}, {Prefetch: -1}, {PrefetchPages: 513}, {PrefetchPages: -1}} {
		dev, err := device.Open(device.Config{MemorySize: 1 << 20})
		require.NoError(t, err)
		if d2, err := New(dev, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v; want ErrConfig", cfg, err)
			if err == nil {
				d2.Close()
			}
		}
		dev.Close()
	}
}

// TestAStaleFaultRecordMovesNothing: a fault record the handler reads
// only after its command has finished and the host has taken the page back
// with Sync must not move the page to the device again. If it did, the
// host's later writes would go to its copy while the device read a
// snapshot. The test holds the handler's lock to make the record stale
// deterministically: the SUM32 faults, the test moves the page over and
// replays itself (as the handler would), waits for the command, brings the
// page back as Sync does, and only then lets the handler read the record.
// TestManagedStress met this interleaving once in CI, as a SUM32 that
// disagreed with the host's sum.
func TestAStaleFaultRecordMovesNothing(t *testing.T) {
	d, c, _, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	m := allocManaged(t, c, 1<<abi.PageShift)
	fillPattern(m.Bytes(), 3)
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	sumPA := paOf(t, c, sumAt)
	before := d.ManagedStats()
	put0, release := holdHandler(d)
	defer release()
	done := make(chan error, 1)
	go func() {
		done <- do(cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: 1 << abi.PageShift})
	}()
	awaitRecords(t, d, put0, 1)
	d.toDevice(m, 0, 1) // what the handler would do for the record, and
	d.replay()          // its replay: the command finishes without it
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(managedWait):
		t.Fatalf("the SUM32 did not finish after %v", managedWait)
	}
	d.toHost(m, 0, 1, false) // Sync's work; the test holds the lock Sync takes
	release()                // the handler now reads a record for a page the host has
	deadline := time.Now().Add(managedWait)
	for d.ManagedStats().Batches == before.Batches {
		if time.Now().After(deadline) {
			t.Fatalf("the handler served no batch in %v", managedWait)
		}
		time.Sleep(50 * time.Microsecond)
	}
	if dev, remote := m.Resident(); dev != 0 || remote != 0 {
		t.Fatalf("after a stale record, %d pages on the device and %d remote; want all on the host", dev, remote)
	}
	if s := d.ManagedStats(); s.Stale != before.Stale+1 {
		t.Errorf("ManagedStats.Stale = %d; want %d, the one stale record", s.Stale, before.Stale+1)
	}
	// And the data path it protects: the host writes, the device sums.
	fillPattern(m.Bytes(), 9)
	require.NoError(t, do(cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: 1 << abi.PageShift}))
	assert.Equal(t, sum32(m.Bytes()), binary.LittleEndian.Uint64(readPA(d, sumPA, 8)), "SUM32 after the host's writes, the host's")
}

// TestManagedStress: the host and the device work on managed memory at
// once, in two goroutines and two allocations, while a third prefetches
// to the device under the faults. Goroutine A fills random page ranges of
// a by the device and checks them on the host after Sync; goroutine B
// writes b on the host and has the device sum it. Every result is checked,
// and every wait has a deadline (a lost replay fails the test, it does not
// hang it).
//
// A fourth copies: the host writes s, the device COPYs s into t, both
// managed and twice the others' size, and the host checks t — the one
// command here that holds a source run while it translates another (the
// read-after-unmap of issue 32 would deliver a reused frame's bytes).
//
// It runs in several modes (burst/evict-source, the read-after-unmap
// under eviction, is its own goroutines: managed_evict_test.go). pages: 64-page allocations in ample memory,
// the faults a few pages at a time. burst: 2 MiB allocations (4 MiB for
// the copy) in 3 MiB of device memory, so a range faults hundreds of pages
// in one burst, the density prefetcher moves whole blocks, and each
// allocation's blocks are evicted to make room for another's while its
// commands and the prefetches run. The inval-delay modes add a 200 µs pause between
// invalidate's range registers and its generation store
// (Hooks.Invalidating): the window in which an engine that woke read the
// registers of the next request under the previous generation, kept a
// stale TLB entry and summed a page after it had moved (issue 33 reports
// a SUM32 mismatch 10 runs in 10 with such a delay before the engine
// learnt to drop everything on waking; device/mmu.go, answerInval). On
// today's engines these modes did not fail with that flush removed (8
// runs, 2 under -race): the deterministic guards of the interleaving are
// TestASleepingEngineDropsWhatItSleptThrough, on the device's registers,
// and TestAnInvalidationIsReadWithItsOwnRange, through this hook (each
// fails 10 runs in 10 with the old order back); these keep the window
// wide under every other mechanism here.
func TestManagedStress(t *testing.T) {
	modes := []struct {
		name  string
		dcfg  device.Config
		cfg   Config
		pages int
		delay time.Duration
	}{
		{"pages", device.Config{MemorySize: 8 << 20}, Config{}, 64, 0},
		{"pages/inval-delay", device.Config{MemorySize: 8 << 20}, Config{}, 64, 200 * time.Microsecond},
		// Engines that sleep the moment they are idle: a stalled engine is
		// asleep when its replay comes, so a replay that wakes the wrong
		// engines, or none (RegStalled, abi/managed.go), hangs a round and
		// fails it after managedWait.
		{"pages/sleep", device.Config{MemorySize: 8 << 20}, Config{Idle: Idle{Mode: IdleSleep}}, 64, 0},
		{"burst/sleep", device.Config{MemorySize: 3 << 20}, Config{Prefetch: PrefetchDensity, Idle: Idle{Mode: IdleSleep}}, blockPages, 0},
		{"burst", device.Config{MemorySize: 3 << 20}, Config{Prefetch: PrefetchDensity}, blockPages, 0},
		{"burst/inval-delay", device.Config{MemorySize: 3 << 20}, Config{Prefetch: PrefetchDensity}, blockPages, 200 * time.Microsecond},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) { managedStress(t, mode.dcfg, mode.cfg, mode.pages, mode.delay, false) })
	}
	// The copy engine pauses after each run it resolves, before it moves
	// a byte: after a COPY's source run, so that an eviction's
	// invalidation arrives while the engine holds it, and after the
	// destination's, so that an engine that answered that invalidation
	// inside the destination's translation (issue 32) still holds the
	// source run while eviction hands its frames to another page. With
	// that fix reverted by hand (checkInval back at the top of translate
	// and translateBack), this mode and the others passed 10 runs in 10
	// without -short: eviction rarely takes the block a COPY holds a run
	// of in that window. burst/evict-source builds that moment
	// (managed_evict_test.go) and fails without the fix; this mode checks
	// every byte under the pauses alone.
	t.Run("burst/resolve-delay", func(t *testing.T) {
		managedStress(t, device.Config{MemorySize: 3 << 20}, Config{Prefetch: PrefetchDensity}, blockPages, 0, true)
	})
	t.Run("burst/evict-source", evictSourceStress)
}

// managedStress is TestManagedStress in one mode: allocations of pages
// pages, delay injected into every invalidation, and if resolveDelay, a
// pause after each run the copy engine resolves.
func managedStress(t *testing.T, dcfg device.Config, cfg Config, pages int, delay time.Duration, resolveDelay bool) {
	d, c, cp, cm := managedSetup(t, dcfg, cfg)
	if resolveDelay {
		d.hw.(*device.Device).SetHooks(device.Hooks{Resolved: func(e abi.Engine, va uint64, write bool) {
			if e == abi.EngineCopy {
				for start := time.Now(); time.Since(start) < 50*time.Microsecond; { // spin, as above
				}
			}
		}})
	}
	if delay > 0 {
		d.SetHooks(Hooks{Invalidating: func() {
			for start := time.Now(); time.Since(start) < delay; { // spin: a sleep would be 50 µs or more of timer slack
			}
		}})
	}
	size := pages << abi.PageShift
	a, b := allocManaged(t, c, uint64(size)), allocManaged(t, c, uint64(size))
	s, tt := allocManaged(t, c, uint64(2*size)), allocManaged(t, c, uint64(2*size))
	cc, err := d.NewChannel(abi.EngineCopy, c, ChannelOptions{})
	require.NoError(t, err)
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	sumPA := paOf(t, c, sumAt)
	duration := time.Second
	if testing.Short() {
		duration = 200 * time.Millisecond
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// rounds[i] is written by goroutine i alone, and read once they are
	// all done; first[i] is closed when goroutine i finishes its first.
	var rounds [4]int
	var first [4]chan struct{}
	for i := range first {
		first[i] = make(chan struct{})
	}
	next := func(i int) {
		if rounds[i]++; rounds[i] == 1 {
			close(first[i])
		}
	}
	wg.Add(4)
	go func() { // the device writes a, the host reads it
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		shadow := make([]byte, size)
		for ; ; next(0) {
			select {
			case <-stop:
				return
			default:
			}
			first := rng.IntN(pages)
			n := 1 + rng.IntN(pages-first)
			off, length := uint64(first)<<abi.PageShift+uint64(rng.IntN(4096)), uint64(n)<<abi.PageShift
			length = min(length, uint64(size)-off)
			v := byte(rng.Uint32())
			if !assert.NoError(t, do(cp, c, abi.Command{Op: abi.OpFill, Dst: a.VA() + off, Size: length, Value: uint64(v)})) {
				return
			}
			copy(shadow[off:off+length], bytes.Repeat([]byte{v}, int(length)))
			if !assert.NoError(t, a.Sync()) {
				return
			}
			if i := managedDiff(a.Bytes(), shadow); i >= 0 {
				t.Errorf("round %d: a[%d] = %#x after FILL and Sync; want %#x", rounds[0], i, a.Bytes()[i], shadow[i])
				return
			}
		}
	}()
	go func() { // the host writes b, the device reads it
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for ; ; next(1) {
			select {
			case <-stop:
				return
			default:
			}
			if !assert.NoError(t, b.Sync()) {
				return
			}
			first := rng.IntN(pages)
			for i := first << abi.PageShift; i < size; i += 1 + rng.IntN(8192) {
				b.Bytes()[i] = byte(rng.Uint32())
			}
			off := uint64(rng.IntN(size/4)) * 4
			length := (uint64(rng.IntN(size-int(off))) + 4) &^ 3
			length = min(length, uint64(size)-off)
			if !assert.NoError(t, do(cm, c, abi.Command{Op: abi.OpSum32, Src: b.VA() + off, Dst: sumAt, Size: length})) {
				return
			}
			got := binary.LittleEndian.Uint64(readPA(d, sumPA, 8))
			if !assert.Equal(t, sum32(b.Bytes()[off:off+length]), got, "round %d: SUM32 of b[%d, +%d), the host's", rounds[1], off, length) {
				return
			}
		}
	}()
	go func() { // prefetches of a to the device, racing the faults
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for ; ; next(2) {
			select {
			case <-stop:
				return
			default:
			}
			first := rng.IntN(pages)
			mg, err := a.Prefetch(uint64(first)<<abi.PageShift, uint64(1+rng.IntN(pages-first))<<abi.PageShift, ToDevice)
			if !assert.NoError(t, err) {
				return
			}
			done := make(chan error, 1)
			go func() { done <- mg.Wait() }()
			select {
			case err := <-done:
				if !assert.NoError(t, err) {
					return
				}
			case <-time.After(managedWait):
				t.Errorf("Prefetch not done after %v", managedWait)
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	go func() { // the host writes s, the device copies it into t
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 8))
		for ; ; next(3) {
			select {
			case <-stop:
				return
			default:
			}
			seed := rng.Uint64()
			off := uint64(rng.IntN(2*pages)) << abi.PageShift
			length := uint64(2*size) - off
			i, ok := copyRound(t, cc, c, s, tt, seed, off, length)
			if !ok {
				return
			}
			if i >= 0 {
				t.Errorf("round %d: t[%d] = %#x after COPY of s[%d, +%d) and Sync; want %#x, s's", rounds[3], off+uint64(i), tt.Bytes()[off+uint64(i)], off, length, s.Bytes()[off+uint64(i)])
				return
			}
		}
	}()
	time.Sleep(duration)
	// Every goroutine but the prefetcher must have finished a round
	// before they stop: the test's liveness check. On a loaded machine a
	// second of wall time can be a few tens of milliseconds of this
	// process's CPU (CI failed here once, at a load average of 25, with
	// one goroutine that had not finished its first round), so the ones
	// that have not are waited for, up to managedWait, rather than
	// failed at once.
	deadline := time.After(managedWait)
wait:
	for _, i := range []int{0, 1, 3} {
		select {
		case <-first[i]:
		case <-deadline:
			break wait
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("rounds %v, stats %+v", rounds, d.ManagedStats())
	if !t.Failed() && (rounds[0] == 0 || rounds[1] == 0 || rounds[3] == 0) {
		t.Errorf("rounds %v: a goroutine never finished a round in %v and %v more", rounds, duration, managedWait)
	}
}

// TestAFailedAllocManagedOnLeavesTheCallersMapping: AllocManagedOn's
// backing is the caller's until it succeeds ("on an error the caller
// does" unmap it): the daemon munmaps a client's memfd mapping when the
// call fails. A failure after the pages were adopted — the context closed,
// or the page-table pool empty — unmapped it inside the driver too, and
// the daemon's own munmap then hit whatever had been mapped at those
// addresses since. Here the context is closed; the mapping must still be
// there after the refusal.
func TestAFailedAllocManagedOnLeavesTheCallersMapping(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	ctx := newContext(t, d)
	mapping, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mapping)
	require.NoError(t, ctx.Close())
	_, err = ctx.AllocManagedOn(mapping, 8192)
	require.Error(t, err, "AllocManagedOn in a closed context")
	assert.NoError(t, unix.Msync(mapping, unix.MS_ASYNC), "the caller's mapping after the refusal (ENOMEM: the driver unmapped it)")
}

// TestAThrashingPagesPinEnds: the thrashing guard maps a page that keeps
// bouncing remotely for thrashPin — and then, as UVM's guard does at its
// pin's deadline (uvm_perf_thrashing: thrashing_unpin_pages unmaps the
// remote mappings), the page's entry is taken back, so that its next
// device access faults and it may move again. Before, a remote entry
// was valid for good: the device never faulted on the page again, and it
// stayed remote until the host happened to take it back.
func TestAThrashingPagesPinEnds(t *testing.T) {
	d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff, ThrashThreshold: 2})
	m := allocManaged(t, c, 1<<abi.PageShift)
	for i := 0; ; i++ {
		require.Less(t, i, 200, "rounds without the guard mapping the page remotely")
		mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: 64, Value: uint64(i + 1)})
		if _, remote := m.Resident(); remote == 1 {
			break
		}
		mustSync(t, m)
	}
	waitUntil(t, "the pin's end", func() bool { _, remote := m.Resident(); return remote == 0 }) // a timer, thrashPin after the pin
	faults := d.ManagedStats().Faults
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: 64, Value: 0x5a})
	device, remote := m.Resident()
	assert.Equal(t, 1, device, "the page on the device after its pin ended and the device wrote it again (remote: %d)", remote)
	assert.Greater(t, d.ManagedStats().Faults, faults, "faults of the device's write after the pin ended")
	mustSync(t, m)
	assert.Equal(t, bytes.Repeat([]byte{0x5a}, 64), m.Bytes()[:64], "the host's view after Sync")
}

// TestThrashingCountsOnlyTheGuardsPages: a page is mapped remotely by
// the thrashing guard, or because no frame is free; ManagedStats counts
// every remote mapping in Remote and only the guard's in Thrashing.
// Before, Thrashing counted both, and a full device read as thrashing.
func TestThrashingCountsOnlyTheGuardsPages(t *testing.T) {
	d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff, ThrashThreshold: -1})
	m := allocManaged(t, c, 1<<abi.PageShift)
	d.um.mu.Lock()
	d.releaseChunks()
	d.um.mu.Unlock()
	for { // every byte of the device taken: no frame for the page
		if _, err := d.alloc.Alloc(4 << 10); err != nil {
			break
		}
	}
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: 64, Value: 7})
	_, remote := m.Resident()
	require.Equal(t, 1, remote, "the page, with no frame free")
	s := d.ManagedStats()
	assert.Equal(t, uint64(1), s.Remote, "ManagedStats().Remote")
	assert.Zero(t, s.Thrashing, "ManagedStats().Thrashing: the guard is off")
}

// TestAPrefetchedRangeFormsFragments: pages a prefetch moves to the
// device get their entries' fragment fields, as a fault's moves do
// (serveBlock refragments), so that the engine's TLB covers a run of
// them with one entry. Before, Prefetch(ToDevice) left every field 0,
// and the engine translated the prefetched range page by page — the fast
// path slower than the faults it is meant to spare.
func TestAPrefetchedRangeFormsFragments(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{})
	m := allocManaged(t, c, 2<<20)
	mg, err := m.Prefetch(0, 2<<20, ToDevice)
	require.NoError(t, err)
	require.NoError(t, mg.Wait())
	d.um.mu.Lock()
	frag := loadPTE(d.vm.pool.mem, m.pages[0].pte).Fragment()
	d.um.mu.Unlock()
	assert.NotZero(t, frag, "page 0's fragment field after a prefetch of the whole 2 MiB")
}
