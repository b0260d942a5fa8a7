package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestALateRemoveLeavesTheNextPagerServed: remove may be called twice
// for one pager — the fault loop drops a client whose descriptor it
// cannot read, while the client's teardown stops its pagers — and in
// either order. Between the two, the teardown closes the pager's
// userfaultfd, and the next MANAGED_PAGER may get the same descriptor
// number. The second remove must not take that number out of epoll: the
// new pager's faults would never be read, and its client's threads would
// wait in them for good.
func TestALateRemoveLeavesTheNextPagerServed(t *testing.T) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(epfd)
	l := &faultLoop{epfd: epfd, byID: map[uint32]*pager{}}

	first, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	require.NoError(t, err)
	p := &pager{uffd: first}
	require.NoError(t, l.add(p))
	l.remove(p)       // the teardown's: stopPager
	unix.Close(first) // release

	again, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(again)
	if again != first {
		t.Skipf("the descriptor number was not reused (%d, then %d)", first, again)
	}
	q := &pager{uffd: again}
	require.NoError(t, l.add(q))

	l.remove(p) // the fault loop's, late
	err = unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, again, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(q.id)})
	assert.NoError(t, err, "the next pager's descriptor is still in epoll (ENOENT: the late remove took it out)")
	l.mu.Lock()
	assert.Same(t, q, l.byID[q.id], "the next pager is still known to the loop")
	l.mu.Unlock()
}
