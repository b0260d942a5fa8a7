package uapi

import "golang.org/x/sys/unix"

// ReceivedFDs returns every file descriptor in a message's control data
// (SCM_RIGHTS), for both ends of the node: the daemon receiving a call,
// a client receiving a reply. Control data it cannot parse brings none it
// can close; the kernel has already closed those it could not deliver
// (MSG_CTRUNC). The caller owns what it returns, and closes what it does
// not keep.
func ReceivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}
