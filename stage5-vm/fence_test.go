package softgpu_test

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage5-vm"
)

func TestWaitAllAcrossEngines(t *testing.T) {
	g := openTest(t)
	buf := mustAlloc(t, g, 4096)
	compute := g.NewBatch(softgpu.Compute)
	compute.Delay(200_000)
	compute.Add32(buf, 4096, 1)
	a, err := compute.Submit()
	must(t, err)
	b, err := g.FillAsync(buf+8192-4096, 64, 7)
	require.NoError(t, err)
	must(t, softgpu.WaitAll(context.Background(), a, b))
	if !a.Fence().Signaled() || !b.Fence().Signaled() {
		t.Errorf("after WaitAll: compute fence signalled %v, copy fence %v; want both", a.Fence().Signaled(), b.Fence().Signaled())
	}
}

func TestWaitAllGivesUpWithItsContext(t *testing.T) {
	g := openTest(t)
	long, err := func() (*softgpu.Pending, error) {
		batch := g.NewBatch(softgpu.Compute)
		batch.Delay(1 << 62)
		return batch.Submit()
	}()
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, softgpu.WaitAll(ctx, long), context.DeadlineExceeded, "WaitAll on a DELAY of centuries")
}

// ExampleWaitAll runs work on both engines at once and waits for both.
func ExampleWaitAll() {
	gpu, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()
	a, _ := gpu.Alloc(1 << 20)
	b, _ := gpu.Alloc(1 << 20)
	c, _ := gpu.Alloc(4096)

	copying, err := gpu.CopyAsync(b, a, 1<<20) // on the copy engine
	if err != nil {
		log.Fatal(err)
	}
	kernel := gpu.NewBatch(softgpu.Compute) // meanwhile, on the compute engine
	kernel.Add32(c, 4096, 1)                // not a or b: the engines run concurrently
	computing, err := kernel.Submit()
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := softgpu.WaitAll(ctx, copying, computing); err != nil {
		log.Fatal(err)
	}
	fmt.Println(copying.Fence().Signaled(), computing.Fence().Signaled())
	// Output: true true
}

// TestTraceShowsTheInterruptPath traces a wait that blocks: the trace must
// show the DELAY, then the engine raising the line, then the driver's
// interrupt thread handling it — the path a blocked waiter is woken by. A
// waiter that arms only after the DELAY is done never blocks (a loaded
// machine can delay it that long), and nothing is raised for it; the test
// then tries again with a DELAY four times as long.
func TestTraceShowsTheInterruptPath(t *testing.T) {
	var path string
	for delay := uint64(200_000); ; delay *= 4 {
		path = filepath.Join(t.TempDir(), "trace.json")
		g, err := softgpu.Open(softgpu.Config{MemorySize: 1 << 20, Wait: softgpu.WaitBlock, Trace: path})
		require.NoError(t, err)
		must(t, g.Delay(softgpu.Compute, delay))
		blocked := g.Stats().Wakeups > 0
		must(t, g.Close())
		if blocked {
			break
		}
		if delay > 1e9 {
			t.Fatalf("the waiter never blocked, even behind a DELAY of %d cycles", delay)
		}
	}
	events := readTrace(t, path)
	var order []string
	for _, ev := range events {
		switch ev.Name {
		case "DELAY", "irq raise", "irq handled":
			order = append(order, ev.Name)
		}
	}
	want := []string{"DELAY", "irq raise", "irq handled"}
	if len(order) < 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Errorf("trace events %v; want %v first", order, want)
	}
}
