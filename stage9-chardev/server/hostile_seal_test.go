package server_test

import (
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// Item 2 of the threat model: pages handed out read-only are read-only.
// The daemon passes the public pages (every client's view of the device,
// and RegNeedWakeup, which every client's submissions read) and each
// channel's status page and completion ring as read-only descriptors. A
// read-only descriptor of a memfd is not enough: /proc/self/fd/N reopens
// the same file with O_RDWR, and a MAP_SHARED, PROT_WRITE mapping of that
// would write the device's own pages. The memfds are sealed
// (F_SEAL_FUTURE_WRITE, after the daemon's own writable mapping, then
// F_SEAL_SEAL) so that no reopen makes them writable.

// attackReadOnly reopens fd writable, as a stranger would, and tries to
// write the file through a shared mapping and through write(2). It
// returns what succeeded, or "" if nothing did.
func attackReadOnly(fd int, size int) string {
	rw, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "" // not even reopened writable
	}
	defer unix.Close(rw)
	if m, err := unix.Mmap(rw, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		unix.Munmap(m)
		return "a writable shared mapping of the reopened descriptor"
	}
	if _, err := unix.Pwrite(rw, []byte{0xff}, int64(size-1)); err == nil {
		return "a write(2) through the reopened descriptor"
	}
	if seals, err := unix.FcntlInt(uintptr(rw), unix.F_GET_SEALS, 0); err == nil && seals&unix.F_SEAL_SEAL == 0 {
		return "F_ADD_SEALS left open"
	}
	return ""
}

func TestReadOnlyPagesStayReadOnlyWhenReopened(t *testing.T) {
	d := startDaemon(t)
	d.live(t, "before the attack")
	r := dialRaw(t, d.node)
	r.negotiate()
	var a uapi.Attach
	fds := r.mustCall(&a)
	r.ctx, r.kick = abi.Context(a.Context), fds[uapi.AttachFDKick]
	public := fds[uapi.AttachFDPublic]
	open := uapi.ChannelOpen{Engine: uint32(abi.EngineCopy)}
	chfds := r.mustCall(&open)
	if got := attackReadOnly(public, int(a.PublicSize)); got != "" {
		t.Errorf("the public pages, passed read-only, allowed %s", got)
	}
	if got := attackReadOnly(chfds[uapi.ChannelFDStatus], int(open.StatusSize)); got != "" {
		t.Errorf("channel %d's status memfd, passed read-only, allowed %s", open.Channel, got)
	}
	// The read-write memfd stays writable for its client, and the daemon
	// still serves: the victim of a writable public page would be every
	// other client.
	if m, err := unix.Mmap(chfds[uapi.ChannelFDUser], 0, int(open.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		t.Errorf("mapping the user memfd, the client's own, writable: %v", err)
	} else {
		unix.Munmap(m)
	}
	d.live(t, "after the attack")
	d.stop(t)
}

// The same attack from a stranger, a process of its own and another uid:
// the read-only descriptors it was passed, reopened through its own
// /proc/self/fd, while a well-behaved client's round trips go on.

func init() {
	strangerRoles["reopen-read-only"] = reopenReadOnly
}

// reopenReadOnly is the "reopen-read-only" role: it attaches and opens a
// copy channel by hand, tries attackReadOnly on the public memfd and the
// status memfd, and says of each "NAME held" or "NAME allowed WHAT".
func reopenReadOnly(node, _ string) error {
	sock, a, fds, err := strangerAttach(node)
	if err != nil {
		return err
	}
	defer sock.Close()
	open := uapi.ChannelOpen{Engine: uint32(abi.EngineCopy)}
	chfds, err := strangerCall(sock, &open)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		name string
		fd   int
		size uint64
	}{{"public", fds[uapi.AttachFDPublic], a.PublicSize}, {"status", chfds[uapi.ChannelFDStatus], open.StatusSize}} {
		if what := attackReadOnly(m.fd, int(m.size)); what != "" {
			fmt.Printf("%s allowed %s\n", m.name, what)
		} else {
			fmt.Printf("%s held\n", m.name)
		}
	}
	fmt.Println("done")
	return nil
}

func TestAStrangerCannotReopenReadOnlyPagesWritable(t *testing.T) {
	d := startDaemon(t)
	w := dialWellBehaved(t, d.node)
	w.roundTrip(t, "before", 1)
	cred, _ := strangerCred()
	got := startStranger(t, "reopen-read-only", d.node, "", cred).findings(t)
	if want := []string{"public held", "status held"}; !slices.Equal(got, want) {
		t.Errorf("a stranger's reopen of its read-only memfds through /proc/self/fd:\n got %q\nwant %q", got, want)
	}
	w.roundTrip(t, "after", 2)
	d.live(t, "after")
	d.stop(t)
}
