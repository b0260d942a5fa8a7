//go:build exercise

package softgpu_test

// The checker of exercise 3.1, "Free the way CUDA does" (book/stage3-pinned.md):
//
//	go test -tags exercise -run Exercise3_1 .
//
// A copy out of pinned memory is queued behind a long DELAY on the copy
// engine, and the memory is freed while the DELAY runs. On the untouched
// stage HostFree disables the memory's window entry at once, and the
// queued copy fails with StatusNoDMA when the engine reaches it; once
// HostFree waits for the fence of each engine's last batch, it returns
// after the copy has run, and the copy succeeds with the bytes it read.
// A command submitted after HostFree still fails with StatusNoDMA. The
// DELAY only has to outlast the few calls between the submission and
// HostFree: the order is the engine's, no speed is asserted.

import (
	"bytes"
	"errors"
	"testing"

	softgpu "softgpu/stage3-pinned"
	"softgpu/stage3-pinned/abi"
)

func TestExercise3_1(t *testing.T) {
	g := openTest(t)
	dev := mustAlloc(t, g, 4096)
	h, err := g.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(h.Bytes(), bytes.Repeat([]byte{9}, 4096))
	src := h.Ptr()

	b := g.NewBatch(softgpu.Copy)
	b.Delay(2_000_000_000) // 2 s of device cycles before the copy
	b.Copy(dev, src, 4096)
	p, err := b.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if p.Fence().Signaled() {
		t.Fatal("the DELAY had finished before HostFree was called: the test's premise is broken")
	}
	if err := g.HostFree(h); err != nil {
		t.Fatalf("HostFree: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("a copy submitted before HostFree = %v; want nil: HostFree must wait for the work submitted before it (StatusNoDMA means it did not)", err)
	}
	got := make([]byte, 4096)
	if err := g.Read(got, dev); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{9}, 4096)) {
		t.Errorf("the copy submitted before HostFree did not bring the pinned bytes (first %d; want 9)", got[0])
	}
	if err := g.Copy(dev, src, 16); !errors.Is(err, abi.StatusNoDMA) {
		t.Errorf("a copy submitted after HostFree = %v; want StatusNoDMA", err)
	}
}
