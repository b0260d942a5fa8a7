package softgpu_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/internal/leakcheck"
)

// ExampleContext runs a fill in an address space of its own, faults it by
// writing past the end of its allocation, reads the fault, and clears it.
func ExampleContext() {
	gpu, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()
	ctx, err := gpu.NewContext()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()

	p, err := ctx.AllocPages(64<<10, softgpu.Page64K)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ctx.Fill(p, 64<<10, 7)) // inside: fine
	err = ctx.Fill(p+64<<10, 64, 7)     // past the end: a fault
	fmt.Println(errors.Is(err, softgpu.StatusOutOfRange))
	fmt.Println(errors.Is(ctx.Fill(p, 64, 7), softgpu.StatusCtxFaulted)) // the context has stopped
	var fault *softgpu.FaultError
	if errors.As(ctx.Err(), &fault) {
		fmt.Printf("fault at +%#x: %v\n", uint64(fault.VA)-uint64(p), fault.Fault)
	}
	ctx.ClearFault()
	fmt.Println(ctx.Fill(p, 64, 7)) // running again
	// Output:
	// <nil>
	// true
	// true
	// fault at +0x10000: unmapped (write)
	// <nil>
}

// TestContextsCannotReachEachOther: through the public API, a context's
// pointer means nothing in another context — not even the same number —
// and a fault in one leaves the other, and the default context, running.
func TestContextsCannotReachEachOther(t *testing.T) {
	leakcheck.Check(t)
	g, err := softgpu.Open(softgpu.Config{MemorySize: 8 << 20})
	must(t, err)
	defer g.Close()
	a, err := g.NewContext()
	must(t, err)
	defer a.Close()
	b, err := g.NewContext()
	must(t, err)
	defer b.Close()
	pa, err := a.Alloc(4096)
	must(t, err)
	pb, err := b.Alloc(4096)
	must(t, err)
	must(t, a.Fill(pa, 4096, 0xaa))
	must(t, b.Fill(pb, 4096, 0xbb))

	host, err := g.HostAlloc(4096)
	must(t, err)
	defer g.HostFree(host)
	ha, err := a.Map(host, 0)
	must(t, err)
	must(t, a.Copy(ha, pa, 4096))
	require.Equal(t, bytes.Repeat([]byte{0xaa}, 4096), host.Bytes(), "a's memory read back through a's mapping of a host buffer is not what a wrote")
	// b's allocation, named in a: either unmapped in a, or a's own page.
	if err := a.Copy(ha, pb, 4096); err == nil && !bytes.Equal(host.Bytes(), bytes.Repeat([]byte{0xaa}, 4096)) {
		t.Fatalf("a read b's memory through b's pointer")
	}
	a.ClearFault()
	// A fault in b: a and the default context go on.
	require.ErrorIs(t, b.Fill(pb+1<<30, 8, 1), softgpu.StatusOutOfRange, "b's fill of an unmapped VA")
	must(t, a.Fill(pa, 8, 1))
	p := mustAlloc(t, g, 64)
	must(t, g.Fill(p, 64, 1))
	assert.ErrorIs(t, b.Fill(pb, 8, 1), softgpu.StatusCtxFaulted, "b after its fault")
}

// TestTraceShowsWalksAndFaults: a traced run in a context records the
// walks of its TLB misses and its page fault, by name, on the engine's
// track.
func TestTraceShowsWalksAndFaults(t *testing.T) {
	leakcheck.Check(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	g, err := softgpu.Open(softgpu.Config{MemorySize: 8 << 20, Trace: path})
	must(t, err)
	ctx, err := g.NewContext()
	must(t, err)
	p, err := ctx.AllocPages(64<<10, softgpu.Page4K)
	must(t, err)
	must(t, ctx.Fill(p, 64<<10, 1))
	require.Error(t, ctx.Fill(p+1<<20, 8, 1), "a fill of an unmapped VA succeeded")
	must(t, ctx.Close())
	must(t, g.Close())
	events := readTrace(t, path)
	var misses, faults int
	for _, ev := range events {
		switch ev.Name {
		case "tlb miss":
			misses++
		case "page fault":
			faults++
			if va, _ := ev.Args["va"].(float64); uint64(va) != uint64(p+1<<20) {
				t.Errorf("page fault at VA %v; want %#x", ev.Args["va"], uint64(p+1<<20))
			}
		}
	}
	if misses == 0 || faults != 1 {
		t.Errorf("trace has %d TLB misses and %d page faults; want some, and 1", misses, faults)
	}
}

// TestTraceShowsFaultsAndReplays: a traced run over managed memory records
// the whole trip of a replayable fault — the engine stalling the channel,
// the driver's fault batch with the pages it migrated, the engine seeing
// the replay — in that order, and Sync's migration back to the host.
func TestTraceShowsFaultsAndReplays(t *testing.T) {
	leakcheck.Check(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	g, err := softgpu.Open(softgpu.Config{MemorySize: 8 << 20, Trace: path})
	must(t, err)
	ctx, err := g.NewContext()
	must(t, err)
	ch, err := ctx.NewChannel(softgpu.Compute, softgpu.ChannelOptions{})
	must(t, err)
	m, err := ctx.AllocManaged(3 * 4096)
	must(t, err)
	must(t, ch.Add32(m.Ptr(), m.Size(), 1))
	must(t, m.Sync())
	must(t, m.Free())
	must(t, ch.Close())
	must(t, ctx.Close())
	must(t, g.Close())
	events := readTrace(t, path)
	first := map[string]float64{}
	count := map[string]int{}
	var migrated float64
	for _, ev := range events {
		switch ev.Name {
		case "stall", "fault batch", "replay", "migrate to host":
			if count[ev.Name] == 0 {
				first[ev.Name] = ev.Ts
			}
			count[ev.Name]++
			if ev.Name == "fault batch" {
				pages, _ := ev.Args["migrated"].(float64)
				migrated += pages
			}
		}
	}
	for _, name := range []string{"stall", "fault batch", "replay", "migrate to host"} {
		if count[name] == 0 {
			t.Errorf("trace has no %q event; counts: %v", name, count)
		}
	}
	if t.Failed() {
		return
	}
	if migrated < 3 {
		t.Errorf("the fault batches migrated %v pages to the device; want the allocation's 3 at least", migrated)
	}
	if !(first["stall"] <= first["fault batch"] && first["fault batch"] <= first["replay"]) {
		t.Errorf("first stall at %v µs, fault batch at %v, replay at %v; want them in that order",
			first["stall"], first["fault batch"], first["replay"])
	}
	if first["migrate to host"] < first["replay"] {
		t.Errorf("the first migration to the host (%v µs) came before the replay (%v): Sync ran after the command", first["migrate to host"], first["replay"])
	}
}

// ExampleContext_AllocManaged: the program writes managed memory, the
// device adds to it in place — its accesses fault the pages over — and the
// program reads the result after Sync brings them back.
func ExampleContext_AllocManaged() {
	g, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	ctx, _ := g.NewContext()
	ch, _ := ctx.NewChannel(softgpu.Compute, softgpu.ChannelOptions{})
	m, err := ctx.AllocManaged(3 * 4096)
	if err != nil {
		panic(err)
	}
	b := m.Bytes()
	b[0], b[4096], b[8192] = 1, 2, 3
	if err := ch.Add32(m.Ptr(), m.Size(), 10); err != nil {
		panic(err)
	}
	if err := m.Sync(); err != nil {
		panic(err)
	}
	fmt.Println(b[0], b[4096], b[8192], g.ManagedStats().Faults > 0)
	// Output: 11 12 13 true
}
