package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd interface (linux/userfaultfd.h), which x/sys/unix does
// not define. The ioctl numbers are _IOWR(0xAA, nr, size).
const (
	sysUserfaultfd      = 323 // x86-64
	uffdUserModeOnly    = 1   // faults from user mode only: no privilege needed
	uffdAPI             = 0xAA
	uffdioAPI           = 0xC018AA3F // struct uffdio_api, 24 bytes
	uffdioRegister      = 0xC020AA00 // struct uffdio_register, 32 bytes
	uffdioCopy          = 0xC028AA03 // struct uffdio_copy, 40 bytes
	registerModeMissing = 1
	pageSize            = 4096
	rangePages          = 256
	msgAddressOffset    = 16 // uffd_msg.arg.pagefault.address
	msgSize             = 32
)

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// runWorkload registers a 1 MiB range with userfaultfd, answers its faults
// from a goroutine, sweeps it with copy from another (emptying it after
// each sweep so every page faults again), optionally runs the collector
// without pause, and prints the number of faults answered every 100 ms.
func runWorkload(gc bool) error {
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
	if e != 0 {
		return fmt.Errorf("userfaultfd: %w (not permitted here)", e)
	}
	api := [3]uint64{uffdAPI, 0, 0} // api, features, ioctls
	if err := ioctl(int(fd), uffdioAPI, unsafe.Pointer(&api)); err != nil {
		return fmt.Errorf("UFFDIO_API: %w", err)
	}
	region, err := unix.Mmap(-1, 0, rangePages*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	reg := [4]uint64{uint64(uintptr(unsafe.Pointer(&region[0]))), rangePages * pageSize, registerModeMissing, 0}
	if err := ioctl(int(fd), uffdioRegister, unsafe.Pointer(&reg)); err != nil {
		return fmt.Errorf("UFFDIO_REGISTER: %w", err)
	}
	fill := make([]byte, pageSize)
	var answered atomic.Int64
	go func() { // the fault handler
		msg := make([]byte, msgSize)
		for {
			if _, err := unix.Read(int(fd), msg); err != nil {
				continue
			}
			addr := *(*uint64)(unsafe.Pointer(&msg[msgAddressOffset])) &^ (pageSize - 1)
			cp := [5]uint64{addr, uint64(uintptr(unsafe.Pointer(&fill[0]))), pageSize, 0, 0} // dst, src, len, mode, copy
			if ioctl(int(fd), uffdioCopy, unsafe.Pointer(&cp)) == nil {
				answered.Add(1)
			}
		}
	}()
	go func() { // the host
		dst := make([]byte, pageSize)
		for {
			for p := 0; p < rangePages; p++ {
				copy(dst, region[p*pageSize:(p+1)*pageSize])
			}
			unix.Madvise(region, unix.MADV_DONTNEED)
		}
	}()
	if gc {
		go func() {
			for {
				runtime.GC()
			}
		}()
	}
	for {
		time.Sleep(100 * time.Millisecond)
		fmt.Printf("faults %d\n", answered.Load())
	}
}
