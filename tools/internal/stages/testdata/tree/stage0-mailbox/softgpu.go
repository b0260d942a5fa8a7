// Package softgpu is the user-facing API.
package softgpu

import "softgpu/stage0-mailbox/driver"

// Open opens the device.
func Open() *driver.Driver {
	return driver.New()
}
