package driver

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of a fault record that arrives late (faults.go, serveBatch): a
// record is matched to a page by its context and VA, and both are reused.
// A record made before an allocation existed, or before a Sync, describes
// a page that is no longer the one at its address (or no longer wanted on
// the device), and must move nothing. Each test holds the handler between
// reading a record and serving it (Hooks.FaultsRead), does what makes the
// record stale, lets the handler go, and then checks the page is on the
// host and the host's writes survive — on the code before the fix each
// one moved the page to the device, deterministically.

// holdAfterRead makes the handler stop after reading its next batch. read
// is closed when it has; release lets it go on (and is safe to call
// twice). Later batches pass freely. Call it before any command faults.
func holdAfterRead(t testing.TB, d *Driver) (read <-chan struct{}, release func()) {
	t.Helper()
	readCh, releaseCh := make(chan struct{}), make(chan struct{})
	var first, once sync.Once
	d.SetHooks(Hooks{FaultsRead: func() {
		first.Do(func() {
			close(readCh)
			<-releaseCh
		})
	}})
	release = func() { once.Do(func() { close(releaseCh) }) }
	t.Cleanup(release)
	return readCh, release
}

// await waits for ch to close, at most managedWait.
func await(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(managedWait):
		t.Fatalf("%s: not after %v", what, managedWait)
	}
}

// awaitErr waits for one error from errs, at most managedWait.
func awaitErr(t testing.TB, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(managedWait):
		t.Fatalf("the command did not finish after %v", managedWait)
		return nil
	}
}

// serveByHand does what the handler would for a record about page i of
// m — moves it and replays — so the stalled command finishes while the
// handler still holds the record.
func serveByHand(d *Driver, m *Managed, i int) {
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	d.toDevice(m, i, 1)
	d.replay()
}

// releaseAndServe lets the held handler go and waits until it has served
// the batch it held.
func releaseAndServe(t testing.TB, d *Driver, release func()) {
	t.Helper()
	before := d.ManagedStats().Batches
	release()
	deadline := time.Now().Add(managedWait)
	for d.ManagedStats().Batches == before {
		if time.Now().After(deadline) {
			t.Fatalf("the handler served no batch in %v", managedWait)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// checkHostWritesReachDevice fails unless every page of m is on the host,
// and a SUM32 over m after the host writes it sees the host's bytes.
func checkHostWritesReachDevice(t *testing.T, d *Driver, c *Context, ch *Channel, m *Managed) {
	t.Helper()
	if dev, remote := m.Resident(); dev != 0 || remote != 0 {
		t.Errorf("after a late record, %d pages on the device and %d remote; want all on the host", dev, remote)
	}
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	fillPattern(m.Bytes(), 9)
	require.NoError(t, do(ch, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: m.Size()}))
	assert.Equal(t, sum32(m.Bytes()), binary.LittleEndian.Uint64(readPA(d, paOf(t, c, sumAt), 8)), "SUM32 after the host's writes, the host's")
}

// TestAFaultRecordOfAFreedAllocationMovesNothing: a record about an
// allocation that was freed, read after a new allocation took the same
// VA, leaves the new allocation's page on the host.
func TestAFaultRecordOfAFreedAllocationMovesNothing(t *testing.T) {
	d, c, _, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	read, release := holdAfterRead(t, d)
	old := allocManaged(t, c, 1<<abi.PageShift)
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() { errs <- do(cm, c, abi.Command{Op: abi.OpSum32, Src: old.VA(), Dst: sumAt, Size: old.Size()}) }()
	await(t, read, "the handler reading the record")
	serveByHand(d, old, 0)
	require.NoError(t, awaitErr(t, errs))
	require.NoError(t, old.Free())
	// VAs are handed out next-fit (deferred.go): a freed one comes back
	// only once the context's space has wrapped round to it. Stand the
	// cursor where a wrap would leave it, rather than allocate the space.
	c.mu.Lock()
	c.nextVA = old.VA()
	c.mu.Unlock()
	m := allocManaged(t, c, 1<<abi.PageShift)
	require.Equal(t, old.VA(), m.VA(), "the new allocation is at %#x, the freed one was at %#x; the test needs the VA reused", m.VA(), old.VA())
	releaseAndServe(t, d, release)
	checkHostWritesReachDevice(t, d, c, cm, m)
}

// TestAFaultRecordOfAClosedContextMovesNothing: a record about a context
// that was closed, read after a new context took the same id and an
// allocation in it the same VA, leaves that allocation's page on the host.
func TestAFaultRecordOfAClosedContextMovesNothing(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	read, release := holdAfterRead(t, d)
	c1 := newContext(t, d)
	ch1, err := d.NewChannel(abi.EngineCompute, c1, ChannelOptions{})
	require.NoError(t, err)
	old := allocManaged(t, c1, 1<<abi.PageShift)
	sumAt, err := c1.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() { errs <- do(ch1, c1, abi.Command{Op: abi.OpSum32, Src: old.VA(), Dst: sumAt, Size: old.Size()}) }()
	await(t, read, "the handler reading the record")
	serveByHand(d, old, 0)
	require.NoError(t, awaitErr(t, errs))
	require.NoError(t, c1.Close())
	c2 := newContext(t, d)
	m := allocManaged(t, c2, 1<<abi.PageShift)
	if c2.ID() != c1.ID() || m.VA() != old.VA() {
		t.Fatalf("the new allocation is context %d VA %#x, the closed one was context %d VA %#x; the test needs both reused",
			c2.ID(), m.VA(), c1.ID(), old.VA())
	}
	ch2, err := d.NewChannel(abi.EngineCompute, c2, ChannelOptions{})
	require.NoError(t, err)
	releaseAndServe(t, d, release)
	checkHostWritesReachDevice(t, d, c2, ch2, m)
}

// TestAFaultRecordOfAClosedChannelMovesNothingAfterSync: a channel closed
// while its command is stalled leaves its record in the buffer, about a
// page that never moved. Sync must make it stale: otherwise it moves the
// page after Sync, the host's writes go to its own copy, and the next Sync
// overwrites them with the device's.
func TestAFaultRecordOfAClosedChannelMovesNothingAfterSync(t *testing.T) {
	d, c, _, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{Prefetch: PrefetchOff})
	read, release := holdAfterRead(t, d)
	ch, err := d.NewChannel(abi.EngineCompute, c, ChannelOptions{})
	require.NoError(t, err)
	m := allocManaged(t, c, 1<<abi.PageShift)
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() { errs <- do(ch, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: m.Size()}) }()
	await(t, read, "the handler reading the record")
	require.NoError(t, ch.Close())
	require.Error(t, awaitErr(t, errs), "the SUM32 of a channel closed while it was stalled succeeded")
	mustSync(t, m)
	releaseAndServe(t, d, release)
	if dev, remote := m.Resident(); dev != 0 || remote != 0 {
		t.Errorf("after a late record, %d pages on the device and %d remote; want all on the host", dev, remote)
	}
	fillPattern(m.Bytes(), 11)
	want := append([]byte(nil), m.Bytes()...)
	mustSync(t, m)
	checkBytes(t, "the host's writes after a second Sync", m.Bytes(), want)
	checkHostWritesReachDevice(t, d, c, cm, m)
}

// TestManagedBytesAfterFree: Bytes of a freed allocation is nil, as a
// freed HostBuffer's is — a late use is an index panic that names itself,
// not a read of memory that is no longer mapped.
func TestManagedBytesAfterFree(t *testing.T) {
	_, c, _, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{})
	m := allocManaged(t, c, 3<<abi.PageShift)
	require.NoError(t, m.Free())
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Bytes() after Free panicked: %v; want nil", r)
		}
	}()
	if b := m.Bytes(); b != nil {
		t.Fatalf("Bytes() after Free = %d bytes at %p; want nil", len(b), b)
	}
}

// TestAnAllocManagedThatRacesCloseIsNotLeftInIt: AllocManaged checks
// that its context is open when it maps (mapManaged), and lists the
// allocation later, under the managed-memory lock. A Close in between
// frees the context's managed memory without finding it, then its tables
// and its id — and the allocation stayed listed under that id, its
// entries in freed tables, to be matched to the faults of the id's next
// context. AllocManaged must fail, and list nothing, when its context
// closed meanwhile.
func TestAnAllocManagedThatRacesCloseIsNotLeftInIt(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	ctx := newContext(t, d)
	d.SetHooks(Hooks{Mapped: func() { require.NoError(t, ctx.Close()) }})
	m, err := ctx.AllocManaged(8192)
	assert.ErrorIs(t, err, ErrContext, "AllocManaged whose context closed while it mapped")
	assert.Nil(t, m, "the allocation")
	d.um.mu.Lock()
	left := len(d.um.allocs[ctx.ID()])
	d.um.mu.Unlock()
	assert.Zero(t, left, "allocations listed under the closed context's id")
}
