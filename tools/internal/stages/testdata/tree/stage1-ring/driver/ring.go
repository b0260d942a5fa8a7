package driver

// Ring is a power-of-two ring of command slots.
type Ring struct {
	drvTail uint64
	size    uint64
}

func newRing(size uint64) *Ring { return &Ring{size: size} }

func (r *Ring) push() { r.drvTail++ }
