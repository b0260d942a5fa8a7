package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
)

// A program may punch its own memfd: MADV_REMOVE on its own mapping of a
// paged allocation takes a page the driver has at home (pageHost) out of
// the memfd, and the program's next touch of it is a missing fault. The
// driver finds the page at home and answers as for a duplicate — lifts
// write protection, which wakes the thread — and the thread runs its
// access again, on the same hole.

func init() {
	strangerRoles["selfpunch"] = selfPunch
}

// selfPunch writes page 0 of a paged allocation (so it is at home),
// punches it out of its own memfd with MADV_REMOVE, and reads it back on
// another goroutine; it prints "read N" with the byte read, or "stuck"
// if the read has not returned after 3 s, then "done".
func selfPunch(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(2 << 12)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("not paged")
	}
	host := m.Bytes()
	host[0] = 7
	if err := unix.Madvise(host[:4096], unix.MADV_REMOVE); err != nil {
		return fmt.Errorf("MADV_REMOVE: %w", err)
	}
	read := make(chan byte, 1)
	go func() { read <- host[0] }()
	select {
	case v := <-read:
		fmt.Printf("read %d\n", v)
	case <-time.After(3 * time.Second):
		fmt.Println("stuck")
	}
	fmt.Println("done")
	return nil
}

// TestAProgramThatPunchesItsOwnPageReadsZeros: a page punched out of
// the memfd is a hole, which reads zeros — in a program with no pager, and
// so in one with the daemon's. The program's read must return, with 0.
func TestAProgramThatPunchesItsOwnPageReadsZeros(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "selfpunch", d.node, "", cred)
	got := s.until(t, "done")
	assert.Equal(t, []string{"read 0"}, got, "the program's read of the page it punched")
	t.Logf("the daemon dropped: %q", dropped(d.log()))
	s.kill()
	d.live(t, "after the program punched its own page")
	d.stop(t)
}
