//go:build exercise

package softgpu_test

// The checker of exercise 0.3, "A lock per engine" (book/stage0-mailbox.md):
//
//	go test -tags exercise -run Exercise0_3 .
//
// It holds a submitter on the copy engine in the driver's Reserved hook —
// between claiming the mailbox and ringing its doorbell, as
// BenchmarkSubmitStall does — and, while it is held, runs a command on the
// compute engine. Behind one global lock that command cannot start until
// the copy submitter is released; with a lock per mailbox it completes
// while the copy submitter is still held. The copy submitter is released
// only after the compute command has completed or a generous bound has
// passed, so the test asserts an order, not a speed: the bound only stops
// it from waiting forever on the untouched stage.

import (
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage0-mailbox"
	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/driver"
)

func TestExercise0_3(t *testing.T) {
	g := openTest(t)
	p := mustAlloc(t, g, 64)
	var armed atomic.Bool
	stalled := make(chan struct{})
	release := make(chan struct{})
	g.SetHooks(driver.Hooks{Reserved: func(abi.Channel) {
		if armed.CompareAndSwap(true, false) {
			close(stalled)
			<-release
		}
	}})
	armed.Store(true)
	copyDone := make(chan error, 1)
	go func() { copyDone <- g.Nop(softgpu.Copy) }() // the submitter held in its hook
	<-stalled

	computeDone := make(chan error, 1)
	go func() { computeDone <- g.Add32(p, 64, 1) }()
	const bound = 10 * time.Second // far beyond any fill on a loaded machine: not a speed, a way out
	select {
	case err := <-computeDone:
		if err != nil {
			t.Errorf("Add32 on the compute engine: %v", err)
		}
		close(release)
	case <-time.After(bound):
		close(release)
		t.Errorf("a command on the compute engine did not complete in %v while a copy submitter was held in its hook: it waits for the copy engine's submitter, so the lock is still global, not per mailbox", bound)
		if err := <-computeDone; err != nil {
			t.Errorf("Add32 on the compute engine, after the release: %v", err)
		}
	}
	if err := <-copyDone; err != nil {
		t.Errorf("the held Nop on the copy engine: %v", err)
	}
}
