//go:build exercise

package softgpu_test

// The checker of exercise 2.3, "A fence in the middle" (book/stage2-fence.md):
//
//	go test -tags exercise -run Exercise2_3 .
//
// The exercise adds two methods, reached here through interfaces so that
// this file compiles before they exist:
//
//	func (b *Batch) FenceSoFar() int       // fence the command added last so far; its index in the batch
//	func (p *Pending) FenceAt(k int) Fence // the fence of the batch's command k
//
// A batch of a fill, a fence, and then a DELAY far longer than any test
// run: the middle fence must signal — and the fill's bytes be there — while
// the DELAY still runs, which the end fence, still unsignalled, shows. The
// order is the engine's own (a fence is written when its command
// completes), so no timing is asserted (the wait's bound only ends a
// checker whose fence never signals); the DELAY is cut short by Close.

import (
	"bytes"
	"context"
	"testing"
	"time"

	softgpu "softgpu/stage2-fence"
)

type fenceSoFar interface{ FenceSoFar() int }
type fenceAt interface{ FenceAt(k int) softgpu.Fence }

func TestExercise2_3(t *testing.T) {
	g := openTest(t)
	p := mustAlloc(t, g, 4096)
	b := g.NewBatch(softgpu.Copy)
	mid, ok := any(b).(fenceSoFar)
	if !ok {
		t.Fatal("Batch has no method FenceSoFar() int: add it (it fences the command added last so far and returns that command's index in the batch)")
	}
	b.Fill(p, 4096, 7)
	k := mid.FenceSoFar()
	if k != 0 {
		t.Errorf("FenceSoFar() after one command = %d; want 0, the index of the command it fences", k)
	}
	const forever = 600_000_000_000 // cycles (ns) of DELAY: past any test's run; Close cuts it short
	b.Delay(forever)
	pending, err := b.Submit()
	if err != nil {
		t.Fatal(err)
	}
	at, ok := any(pending).(fenceAt)
	if !ok {
		t.Fatal("Pending has no method FenceAt(k int) Fence: add it (the fence of the batch's command k)")
	}
	f := at.FenceAt(k)
	// The bound is not a speed: a fence that signals does so as soon as
	// the fill completes; one that does not would wait for the DELAY.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.WaitContext(ctx); err != nil {
		t.Fatalf("waiting for the fence after the fill: %v (it does not signal before the end of the batch: does the fill carry FlagFence?)", err)
	}
	if pending.Fence().Signaled() {
		t.Fatal("the batch's end fence signalled: the DELAY cannot have finished, so the test's premise is broken")
	}
	got := make([]byte, 4096)
	if err := g.Read(got, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{7}, 4096)) {
		t.Errorf("after the middle fence signalled, the fill's bytes are not all 7 (first %d)", got[0])
	}
	if !f.Signaled() {
		t.Error("the middle fence's Signaled() = false after its Wait returned")
	}
}
