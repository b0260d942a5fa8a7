package server_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
)

func init() {
	strangerRoles["pager-unprivileged"] = pagerUnprivileged
}

// pagerUnprivileged is a stranger role, run as another uid: it makes
// paged managed memory, lets the device write it, and reports what a
// system call given the memory meets before and after Sync, and what the
// host reads.
func pagerUnprivileged(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(64 << 10)
	if err != nil {
		return err
	}
	defer m.Free()
	fmt.Printf("paged %v user-mode-only %v\n", m.Paged(), m.UserModeOnly())
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	syscallSays := func() string {
		n, err := unix.Write(p[1], m.Bytes()[:4096]) // the kernel reads the page: a fault in kernel mode
		if n > 0 {
			var buf [4096]byte
			unix.Read(p[0], buf[:n])
		}
		if errors.Is(err, syscall.EFAULT) {
			return "EFAULT"
		}
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	if err := g.Fill(m.Ptr(), 64<<10, 3); err != nil {
		return err
	}
	fmt.Println("syscall on a page on the device:", syscallSays())
	if err := m.Sync(); err != nil {
		return err
	}
	fmt.Println("syscall after Sync:", syscallSays())
	if err := g.Fill(m.Ptr(), 64<<10, 4); err != nil {
		return err
	}
	fmt.Println("host reads", m.Bytes()[0], m.Bytes()[64<<10-1])
	fmt.Println("done")
	return nil
}

// TestPagerUnprivilegedClient: a client of another uid, where
// vm.unprivileged_userfaultfd is 0, is paged with a user-mode-only
// userfaultfd. Its own reads fault to the daemon as root's do; a system
// call given a page on the device fails with EFAULT — the documented
// limit — and succeeds once Sync has brought the range home.
func TestPagerUnprivilegedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if unix.Geteuid() != 0 {
		t.Skip("needs root, to run a client as another uid")
	}
	sysctl, _ := os.ReadFile("/proc/sys/vm/unprivileged_userfaultfd")
	d := startDaemon(t)
	s := startStranger(t, "pager-unprivileged", d.node, "", &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
	got := s.findings(t)
	want := []string{
		"paged true user-mode-only true",
		"syscall on a page on the device: EFAULT",
		"syscall after Sync: ok",
		"host reads 4 4",
	}
	if strings.TrimSpace(string(sysctl)) == "1" {
		want[0], want[1] = "paged true user-mode-only false", "syscall on a page on the device: ok"
	}
	if !slices.Equal(got, want) {
		t.Errorf("an unprivileged client found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	d.live(t, "after the unprivileged client")
	d.stop(t)
}
