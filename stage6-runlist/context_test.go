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
	softgpu "softgpu/stage6-runlist"
	"softgpu/stage6-runlist/internal/leakcheck"
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
