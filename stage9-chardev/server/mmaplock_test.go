package server_test

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// How a stranger holds its own mmap lock, with no privilege at all. Each
// of the pager's calls into a client's memory (UFFDIO_COPY,
// UFFDIO_WRITEPROTECT, the wake) takes that client's mmap lock for
// reading; mprotect takes it for writing, for as long as the kernel walks
// the mappings it changes. A process with thousands of populated mappings
// holds its lock tens of milliseconds a call, as often as it likes.

// mmapLock is a span of populated mappings, one mprotect of which holds
// its process's mmap lock for writing. A hold is made by one goroutine
// at a time.
type mmapLock struct {
	base, span uintptr
	prot       uintptr // what the next hold sets: PROT_WRITE flips each time, so each hold changes every mapping
}

// lockChunk is the size of each mapping: one memfd, mapped again and
// again.
const lockChunk = 2 << 20

// newMmapLock maps one 2 MiB memfd maps times, each its own populated
// mapping, side by side; its hold walks them all.
func newMmapLock(maps int) (*mmapLock, error) {
	fd, err := unix.MemfdCreate("mmaplock", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, lockChunk); err != nil {
		return nil, err
	}
	span := uintptr(lockChunk) * uintptr(maps)
	base, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return nil, fmt.Errorf("reserving %d bytes: %v", span, errno)
	}
	for i := range uintptr(maps) {
		if _, _, errno := syscall.Syscall6(syscall.SYS_MMAP, base+i*lockChunk, lockChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE, uintptr(fd), 0); errno != 0 {
			return nil, fmt.Errorf("mapping %d: %v", i, errno)
		}
	}
	return &mmapLock{base: base, span: span, prot: unix.PROT_READ}, nil
}

// hold mprotects the span once and returns how long that took: about how
// long the lock was held.
func (l *mmapLock) hold() time.Duration {
	t := time.Now()
	syscall.Syscall(syscall.SYS_MPROTECT, l.base, l.span, l.prot)
	l.prot ^= unix.PROT_WRITE
	return time.Since(t)
}

// shorten makes each hold take about target: it times one hold of the
// whole span, then keeps the share of the mappings that takes target
// (one at least). It returns the whole span's hold and how many
// mappings are kept.
func (l *mmapLock) shorten(target time.Duration) (whole time.Duration, maps int) {
	all := int(l.span / lockChunk)
	whole = l.hold()
	maps = max(1, min(int(float64(all)*float64(target)/float64(whole)), all))
	l.span = uintptr(lockChunk) * uintptr(maps)
	return whole, maps
}
