package driver

// Driver submits commands through the mailbox.
type Driver struct {
	slot int
}

// New returns a driver.
func New() *Driver {
	return &Driver{}
}

// Submit writes one command.
func (d *Driver) Submit() {
	d.slot++
}
