package server_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// TestEveryCallHasAHandler: a call listed in uapi.Calls decodes, so the
// only way the daemon answers a well-formed one with ErrBadRequest is
// that its dispatch has no case for it — a call added to the table and
// to the C header but not to the daemon. Each call is made once, zeroed
// (its descriptors, if it takes any, a memfd), by an attached client:
// whatever the daemon thinks of a zero argument, it must have an opinion.
func TestEveryCallHasAHandler(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	r.attach()
	for i := range uapi.Calls {
		c := &uapi.Calls[i]
		var fds []int
		for range c.FDsIn {
			fd := newMemfd(t, 4096, unix.F_SEAL_SHRINK)
			defer unix.Close(fd)
			fds = append(fds, fd)
		}
		if errno, _ := r.call(c.New(), fds...); errno == uapi.ErrBadRequest {
			t.Errorf("%s (nr %#02x), listed in uapi.Calls, answered %v: the daemon has no handler for it", c.Name, uapi.Nr(c.Request), errno)
		}
	}
}
