// Package device is a fixture for the book renderer's tests: a tiny engine
// with anchors in the places a chapter would include.
package device

import "sync/atomic"

// ANCHOR: engine
// Engine polls its command slot.
type Engine struct {
	doorbell atomic.Uint64 // written by the host
	done     atomic.Uint64 // written by the engine
}

// ANCHOR_END: engine

// ANCHOR: poll
// pollLoop runs until stop is closed.
func (e *Engine) pollLoop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		// ANCHOR: body
		if seq := e.doorbell.Load(); seq != e.done.Load() {
			e.execute(seq)
		}
		// ANCHOR_END: body
	}
}

// ANCHOR_END: poll

func (e *Engine) execute(seq uint64) {
	e.done.Store(seq)
}
