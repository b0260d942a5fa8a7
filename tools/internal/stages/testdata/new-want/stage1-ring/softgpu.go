// Package softgpu is the user-facing API.
package softgpu

import "softgpu/stage1-ring/driver"

// Open opens the device.
func Open() *driver.Driver {
	return driver.New()
}
