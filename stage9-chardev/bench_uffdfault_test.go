package softgpu_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
)

// benchUffdFaultProcess is Baseline/op=uffdfault/path=process: the floor
// under ManagedPager/touch=sparse/path=pager, measured the same way but
// with no device, no driver and no daemon. This process maps one page of
// a memfd and registers it with a userfaultfd for missing faults, as the
// client library does (client/pager.go); a child process (this test
// binary again, in the answerer role below) holds the descriptor, waits
// in poll(2) on a thread of its own, and answers each fault with one
// UFFDIO_COPY of a page of 0xA5 bytes. Each round punches the page out of
// the memfd (untimed: the next touch is a missing fault), sleeps 1 ms as
// ManagedPager does between its rounds (so the answerer is asleep when
// the fault comes, as the daemon's pager is), then times a read of the
// page. The fault's round trip is two wakes across the boundary — the
// kernel wakes the answerer with the fault, and the answer's copy wakes
// the faulting thread — and one page allocated and copied: what any
// pager must pay on this machine before it does anything of its own.
//
// ns/op is the mean, as ManagedPager's is, with the median and the tail.
func benchUffdFaultProcess(b *testing.B) {
	const page = 4096
	fd, err := unix.MemfdCreate("softgpu-uffdfault", unix.MFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, page); err != nil {
		b.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	ufd, err := uffd.Open(0, 0)
	if errors.Is(err, unix.EPERM) {
		ufd, err = uffd.Open(uffd.UserModeOnly, 0) // as the client library falls back
	}
	if err != nil {
		b.Skipf("no userfaultfd here: %v", err)
	}
	if err := uffd.Register(ufd, uffd.Address(m), page, uffd.ModeMissing); err != nil {
		unix.Close(ufd)
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(ufd), "userfaultfd")
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), uffdAnswererEnv+"=1")
	cmd.ExtraFiles = []*os.File{f} // the answerer's descriptor 3
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	// The answerer's copy is the only one from here on: if it dies, the
	// userfaultfd is released with it, the registration goes, and a
	// touch finds a plain zero page — which the check below reports —
	// rather than waiting for ever.
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	touch := func() error {
		if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, page); err != nil {
			return err
		}
		sleepFor(time.Millisecond)
		return nil
	}
	if err := touch(); err != nil { // the first answer waits for the answerer to start: untimed
		b.Fatal(err)
	}
	if sink += consume(m); m[0] != uffdAnswerByte {
		b.Fatalf("the first touch read %#x, not the answerer's %#x: it is not answering", m[0], uffdAnswerByte)
	}
	var lat latencies
	for b.Loop() {
		if err := touch(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		sink += consume(m)
		lat = append(lat, time.Since(start))
		if m[0] != uffdAnswerByte {
			b.Fatalf("the touch read %#x, not the answerer's %#x: the answerer has gone", m[0], uffdAnswerByte)
		}
	}
	lat.report(b)
	b.ReportMetric(lat.mean(), "ns/op")
}

const (
	uffdAnswererEnv = "SOFTGPU_UFFDFAULT_ANSWERER"
	uffdAnswerByte  = 0xA5
)

func init() {
	if os.Getenv(uffdAnswererEnv) != "" {
		if err := uffdAnswerer(3); err != nil {
			fmt.Fprintln(os.Stderr, "uffdfault answerer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// uffdAnswerer is the child of benchUffdFaultProcess: on a thread of its
// own it waits in poll(2) for fault messages on the userfaultfd it was
// given, reads them, and answers each with one UFFDIO_COPY of a page of
// uffdAnswerByte — until its parent has gone (each poll times out after
// a second to look). A duplicate fault finds the page there (EEXIST) and
// is let be.
func uffdAnswerer(fd int) error {
	runtime.LockOSThread()
	src, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	for i := range src {
		src[i] = uffdAnswerByte
	}
	buf := make([]byte, 16*uffd.MsgSize)
	parent := os.Getppid()
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 1000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			if os.Getppid() != parent {
				return nil // the benchmark has gone
			}
			continue
		}
		n, err = unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		for off := 0; off+uffd.MsgSize <= n; off += uffd.MsgSize {
			f, err := uffd.Decode(buf[off : off+uffd.MsgSize])
			if err != nil {
				return err
			}
			if _, err := uffd.Copy(fd, f.Address&^4095, src); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("UFFDIO_COPY at %#x: %w", f.Address, err)
			}
		}
	}
}
