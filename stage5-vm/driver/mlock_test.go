package driver

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage5-vm/device"
)

func TestPinErrorSaysWhatToChange(t *testing.T) {
	err := pinError(1<<20, unix.ENOMEM)
	if !errors.Is(err, ErrPinLimit) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("pinError(ENOMEM) = %v; want it to wrap ErrPinLimit and ENOMEM", err)
	}
	for _, hint := range []string{"RLIMIT_MEMLOCK", "ulimit -l", "CAP_IPC_LOCK"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("pinError(ENOMEM) = %q; want it to mention %q", err, hint)
		}
	}
	if err := pinError(4096, unix.EINVAL); errors.Is(err, ErrPinLimit) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("pinError(EINVAL) = %v; want EINVAL, and not ErrPinLimit (the limit is not the cause)", err)
	}
}

// lockLimitChild is set in the environment of the child process that
// TestHostAllocOverTheLockLimit starts.
const lockLimitChild = "SOFTGPU_TEST_LOCK_LIMIT_CHILD"

// TestHostAllocOverTheLockLimit runs itself again in a child process with
// RLIMIT_MEMLOCK cut to 64 KiB, so that mlock really fails there; the
// lowered limit cannot leak into other tests.
func TestHostAllocOverTheLockLimit(t *testing.T) {
	if os.Getenv(lockLimitChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostAllocOverTheLockLimit$", "-test.v")
		cmd.Env = append(os.Environ(), lockLimitChild+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child process\n%s", out)
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("child process skipped:\n%s", out)
		}
		return
	}
	// In the child. Lock the goroutine to its thread and drop
	// CAP_IPC_LOCK from that thread (capabilities are per thread): with it,
	// as root has it, the limit does not apply. HostAlloc's mlock then runs
	// on this thread, under the limit.
	runtime.LockOSThread() // never unlocked: the thread dies with the child
	if err := dropIPCLock(); err != nil {
		t.Skipf("cannot drop CAP_IPC_LOCK: %v", err)
	}
	const limit = 64 << 10
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Skipf("cannot lower RLIMIT_MEMLOCK: %v", err)
	}
	dev, err := device.Open(device.Config{MemorySize: 1 << 20})
	require.NoError(t, err)
	defer dev.Close()
	// The default bounce ring (1 MiB) does not fit: New fails, saying why.
	if _, err := New(dev, Config{}); !errors.Is(err, ErrPinLimit) || !strings.Contains(err.Error(), "ulimit -l") {
		t.Errorf("New over the lock limit = %v; want ErrPinLimit and a hint", err)
	}
	d, err := New(dev, Config{BounceChunk: 4096, BounceBuffers: 2})
	require.NoError(t, err, "New with an 8 KiB bounce ring under a 64 KiB limit")
	defer d.Close()
	_, err = d.HostAlloc(1 << 20)
	t.Logf("HostAlloc(1 MiB) under a 64 KiB limit: %v", err)
	if !errors.Is(err, ErrPinLimit) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("HostAlloc(1 MiB) under a 64 KiB limit = %v; want ErrPinLimit wrapping ENOMEM", err)
	}
	if err != nil && !strings.Contains(err.Error(), "64 KiB") {
		t.Errorf("HostAlloc error %q does not give the limit (64 KiB)", err)
	}
	p, err := d.HostAlloc(16 << 10)
	require.NoError(t, err, "HostAlloc(16 KiB) under the limit")
	d.HostFree(p)
}

// dropIPCLock removes CAP_IPC_LOCK from the calling thread's effective
// capabilities.
func dropIPCLock() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
	return unix.Capset(&hdr, &data[0])
}
