package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// Hooks for the punch helper's hostile tests (hostile_helper*_test.go).

// SetPunchHelperExe makes s start its punch helpers from exe instead of
// /proc/self/exe: a test's stand-in for a helper that misbehaves. Call it
// before any client asks for a pager.
func SetPunchHelperExe(s *Server, exe string) {
	s.punches.mu.Lock()
	defer s.punches.mu.Unlock()
	s.punches.exe = exe
}

// PunchThenDieEnv, set to "punch-then-die" beside punchHelperEnv, makes
// the process a punch helper that carries out its first request — the
// clock word, then the fallocate, exactly as punchOne does — and then
// exits without answering: a helper killed (SIGKILL by an operator, the
// OOM killer) between its fallocate and its reply. It is a package-level
// variable's initializer, so it runs before punch.go's init.
const PunchThenDieEnv = "SOFTGPU_TEST_PUNCH_THEN_DIE"

var _ = punchThenDieHelper()

func punchThenDieHelper() bool {
	if os.Getenv(PunchThenDieEnv) != "punch-then-die" || os.Getenv(punchHelperEnv) != "1" {
		return false
	}
	page, err := unix.Mmap(4, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Exit(2)
	}
	var req [punchRequestSize]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(3, req[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n == 0 && oobn == 0 {
		os.Exit(0)
	}
	punchOne(req[:n], oob[:oobn], clockOf(page))
	os.Exit(0) // no reply: the daemon reads end of file
	return true
}
