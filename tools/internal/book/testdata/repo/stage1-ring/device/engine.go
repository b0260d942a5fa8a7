// Package device is a fixture for the book renderer's tests: a tiny engine
// with anchors in the places a chapter would include.
package device

import "sync/atomic"

// ANCHOR: engine
// Engine consumes a ring of commands.
type Engine struct {
	tail atomic.Uint64 // written by the host: the doorbell
	head atomic.Uint64 // written by the engine
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
		for head := e.head.Load(); head != e.tail.Load(); head++ {
			e.execute(head)
		}
	}
}

// ANCHOR_END: poll

func (e *Engine) execute(seq uint64) {
	e.head.Store(seq + 1)
}
