package device

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Device memory is mapped from the operating system, not allocated on the
// Go heap: a request the host cannot back is then an error from mmap
// (ENOMEM) that Open returns, where a Go allocation of the same size would
// kill the process. The pages are anonymous and private; the kernel backs
// each with zeroed memory on first touch.

// mapMemory reserves size bytes of zeroed memory for the arena.
func mapMemory(size uint64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap of %d bytes: %w", ErrNoMemory, size, err)
	}
	return mem, nil
}

// unmapMemory gives the arena back. No engine is running by then.
func unmapMemory(mem []byte) {
	if len(mem) == 0 {
		return
	}
	if err := unix.Munmap(mem); err != nil {
		panic(fmt.Sprintf("device: invariant broken: munmap of the arena mmap returned: %v", err))
	}
}
