package server_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

// The attack: a stranger keeps the daemon's memory after giving its
// channels back. Each CHANNEL_OPEN makes two new memfds (device/shared.go,
// Share) — the doorbell page and submission ring, the status page and
// completion ring — whose pages the daemon writes, and so allocates;
// CHANNEL_CLOSE gives the channel back (its quota refunded, the device's
// pages private again), but the memfds live on for as long as anyone holds
// a descriptor of them, and the client was handed one of each. So a
// client that opens and closes one channel again and again, keeping the
// descriptors, holds memory the daemon allocated that no quota counts,
// while holding no channel at all: about 12 KiB a cycle, as much as its
// RLIMIT_NOFILE allows per process (here ~120 MiB for 20 000
// descriptors), and as many processes as the uid may run, each dialling
// in turn. (The pages are the daemon's: charged to its memory cgroup.)
//
// The fix (linger.go) counts a closed channel against the Channels quota
// until its files are gone, so the stranger is refused its next
// CHANNEL_OPEN with uapi.ErrQuota once it holds a quota's worth of them;
// it stops there and reports what it holds.

func init() {
	strangerRoles["keep-channel-fds"] = keepChannelFDs
}

// keepChannelFDs opens and closes a channel arg times on one connection,
// keeping every descriptor the replies carried, or until an open is
// refused; it prints how many cycles it made and how the next open was
// refused ("open errno=N", or "open ok" if none was), how many distinct
// files it holds, how many bytes they have allocated, and "done".
func keepChannelFDs(node, arg string) error {
	var cycles int
	fmt.Sscan(arg, &cycles)
	sock, _, fds, err := strangerAttach(node)
	if err != nil {
		return err
	}
	defer sock.Close()
	held := fds
	var refused error
	i := 0
	for ; i < cycles; i++ {
		open := uapi.ChannelOpen{Engine: uint32(i % 2)}
		got, err := strangerCall(sock, &open)
		var errno uapi.Errno
		if errors.As(err, &errno) {
			refused = err
			break
		}
		if err != nil {
			return fmt.Errorf("open %d: %w", i, err)
		}
		held = append(held, got...)
		if _, err := strangerCall(sock, &uapi.ChannelClose{Channel: open.Channel}); err != nil {
			return fmt.Errorf("close %d: %w", i, err)
		}
	}
	files := map[[2]uint64]int64{}
	for _, fd := range held {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			files[[2]uint64{st.Dev, st.Ino}] = st.Blocks * 512
		}
	}
	var bytes int64
	for _, b := range files {
		bytes += b
	}
	fmt.Printf("%d cycles, then %s\n", i, errnoLine("open", refused))
	fmt.Printf("holding %d descriptors of %d files: %d bytes allocated\n", len(held), len(files), bytes)
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotKeepTheDaemonsMemoryAfterClosingItsChannels: a
// stranger (uid nobody) opens and closes one channel 2500 times, keeping
// the descriptors. It holds no channel at the end; the daemon's files it
// still holds must not have more memory than the whole device (16 MiB
// here) — a fixed number of files per channel id would hold a few
// pages each, and a quota on channels a few pages per channel. If it was
// refused a channel, the refusal must be the quota's.
func TestAStrangerCannotKeepTheDaemonsMemoryAfterClosingItsChannels(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	s := startStranger(t, "keep-channel-fds", d.node, "2500", &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
	lines := s.findings(t)
	require.Len(t, lines, 2, "the stranger's report")
	if !strings.HasSuffix(lines[0], "open ok") {
		require.True(t, strings.HasSuffix(lines[0], fmt.Sprintf("open errno=%d", uint32(uapi.ErrQuota))), "the stranger's open was refused, but not by its quota: %q", lines[0])
	}
	t.Logf("the stranger: %s", lines[0])
	var descriptors, files, bytes int64
	_, err := fmt.Sscanf(lines[1], "holding %d descriptors of %d files: %d bytes allocated", &descriptors, &files, &bytes)
	require.NoError(t, err, "the stranger said %q", lines[1])
	t.Logf("the stranger, holding no channel, holds %d of the daemon's files (%d descriptors) with %d KiB allocated", files, descriptors, bytes>>10)
	require.LessOrEqual(t, bytes, int64(16<<20), "memory the daemon allocated for channels a stranger has closed, held by the stranger and counted by no quota")
	d.live(t, "after the stranger")
	d.stop(t)
}
