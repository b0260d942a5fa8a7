package driver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestANewContextDoesNotInheritAFault: a context closed while faulted
// (never cleared) gives its id back; the context made next with that id
// starts healthy — Err is nil and its commands run — rather than failing
// with the old context's fault. (Mutation S5-10: enableContext no longer
// acknowledges the faults an earlier context with the same id left.)
func TestANewContextDoesNotInheritAFault(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	a, err := d.NewContext()
	require.NoError(t, err)
	require.Error(t, in(d, a, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: userVABase, Size: 8, Value: 1}), "FILL at an unmapped VA")
	require.ErrorIs(t, a.Err(), ErrContextFaulted)
	require.NoError(t, a.Close())
	b, err := d.NewContext()
	require.NoError(t, err)
	require.Equal(t, a.ID(), b.ID(), "the new context reuses the id")
	require.NoError(t, b.Err(), "a new context's Err")
	va, err := b.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	require.NoError(t, in(d, b, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: va, Size: 8, Value: 2}), "FILL in the new context")
	require.Equal(t, byte(2), d.hw.Memory()[paOf(t, b, va)])
}
