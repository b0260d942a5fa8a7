package driver

// Driver submits commands through the ring.
type Driver struct {
	ring *Ring
}

// New returns a driver.
func New() *Driver {
	return &Driver{ring: newRing(16)}
}

// Submit writes one command.
func (d *Driver) Submit() {
	d.ring.push()
}
