package mmio

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
)

// TestRegistersOutsideTheHeapOrderWhatTheyPublish: a register space in
// memory the Go heap does not own (an mmap, as a shared device's is) still
// orders, for the race detector, what one goroutine wrote before a Store
// and another reads after the Load that sees it. The detector ignores
// atomics outside the heap; without the registers telling it (race.go),
// `go test -race` reports this plain handoff as a race, and with it a
// device whose runlist travels through such registers.
func TestRegistersOutsideTheHeapOrderWhatTheyPublish(t *testing.T) {
	const size = 4096
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[0])), size/8)
	r := NewRegisters(words, func() uint64 { return 0 })
	const flag = abi.RegID // a stored word with no special case
	var payload [8]uint64  // plain memory, on the heap
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r.Load(flag) == 0 {
		}
		for i := range payload {
			assert.Equal(t, uint64(i+1), payload[i], "payload[%d] = %d after the flag; want %d", i, payload[i], i+1)
		}
	}()
	for i := range payload {
		payload[i] = uint64(i + 1)
	}
	r.Store(flag, 1)
	<-done
}
