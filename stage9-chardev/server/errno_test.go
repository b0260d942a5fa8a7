package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/uapi"
)

// TestAHungEngineIsBusyNotInvalid: a call the driver failed because an
// engine did not answer within its bound (driver.ErrTimeout, wrapped) is
// answered with ErrBusy — the device still holds what the call named —
// never with ErrInval, which would blame the client's argument.
func TestAHungEngineIsBusyNotInvalid(t *testing.T) {
	err := fmt.Errorf("unmap: %w", fmt.Errorf("%w: copy did not acknowledge TLB invalidation 2 within 1s", driver.ErrTimeout))
	require.Equal(t, uapi.ErrBusy, errnoFor(err), "errnoFor(%v)", err)
}
