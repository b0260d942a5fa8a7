package server_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// Red-team finding F2: a window entry freed behind a faulted channel.
//
// The rule (server/owed.go, driver/pinned.go): a freed window entry, and
// its charge, come back once the commands queued before the free have
// run or never will; nothing accepted is lost, and a uid is charged only
// while the driver really holds the entry.
//
// The attack: HOST_UNREGISTER takes each channel's mark from its
// doorbell, which the client writes. A channel faulted by a garbage
// doorbell (head + 2^40) has a mark that can never pass; while it is
// faulted the mark counts as passed, but the driver reclaims lazily, and
// CHANNEL_CLOSE then resets the channel (device/sched.go, reset): the
// fault is cleared and the completions rewritten, so the mark neither
// passes nor is excused by the fault again. Were that all retired asked,
// the entry would never retire, its owed charge never be settled, and the
// uid keep it, and the device lose it, for the daemon's life: a stranger
// that registers a page, faults its channel, unregisters and closes,
// round after round, holding one page at a time, would be refused at its
// quota of 32 after 32 rounds and leave 32 of the device's 64 entries
// gone. What brings the entry back is that retired (driver/pinned.go)
// passes every mark of a channel its engine has let go (Channel.released,
// stored once the engine has taken a list without it).
//
// So: a client that holds one page at a time is never refused, however
// its channels ended; once it has gone, a fresh client of its uid gets
// the uid's whole quota of entries, and a client of another uid its own
// quota's.

func init() {
	strangerRoles["window-fault-leak"] = windowFaultLeak
}

// windowFaultLeak is the "window-fault-leak" role: on one connection,
// for up to abi.WindowSlots rounds, it opens a channel on the copy
// engine, registers a page of host memory (HOST_REGISTER), faults the
// channel with a garbage doorbell, unregisters the page and closes the
// channel. It says how a refused HOST_REGISTER was refused, "rounds N",
// and "done", and exits.
func windowFaultLeak(node, _ string) error {
	sp, call, err := dialAttached(node)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	defer sp.close()
	rounds := 0
	for ; rounds < abi.WindowSlots; rounds++ {
		if call, err := sp.open(uint32(abi.EngineCopy)); err != nil {
			return fmt.Errorf("round %d: %s: %w", rounds+1, call, err)
		}
		va, err := hostRegisterPage(sp)
		if err != nil {
			fmt.Println(errnoLine("HOST_REGISTER", err))
			break // the channel is left open, unfaulted: the exit closes it
		}
		if err := sp.faultChannel(0); err != nil {
			return fmt.Errorf("round %d: %w", rounds+1, err)
		}
		if _, err := strangerCall(sp.sock, &uapi.HostUnregister{VA: va}); err != nil {
			return fmt.Errorf("round %d: HOST_UNREGISTER: %w", rounds+1, err)
		}
		if err := sp.closeChannel(0); err != nil {
			return fmt.Errorf("round %d: CHANNEL_CLOSE: %w", rounds+1, err)
		}
	}
	fmt.Printf("rounds %d\n", rounds)
	fmt.Println("done")
	return nil
}

// hostRegisterPage registers a sealed memfd of a page on the spinner's
// connection and returns its VA.
func hostRegisterPage(sp *spinner) (uint64, error) {
	fd, err := unix.MemfdCreate("hostile-host", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd) // the daemon maps it
	if err := unix.Ftruncate(fd, 4096); err != nil {
		return 0, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		return 0, err
	}
	reg := &uapi.HostRegister{Size: 4096}
	if _, err := strangerCall(sp.sock, reg, fd); err != nil {
		return 0, err
	}
	return reg.VA, nil
}

// faultChannel writes a doorbell a long way past the spinner's i-th
// channel's head — more than a ring ahead, which the engine refuses
// (device/ring.go, accept) — kicks the daemon, and waits until the
// engine has faulted the channel (FaultDoorbell).
func (sp *spinner) faultChannel(i int) error {
	ch := sp.chans[i]
	word(ch.user, abi.RegDoorbell).Store(ch.head + 1<<40)
	sp.kickDaemon()
	fault := word(ch.status, uapi.StatusPageOffset+abi.RegChannelFault)
	for end := time.Now().Add(liveBound); abi.ChannelFault(fault.Load()) == abi.FaultNone; {
		if time.Now().After(end) {
			return fmt.Errorf("channel %d not faulted %v after a doorbell of head+2^40", ch.id, liveBound)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// hogEntries returns the N of a window-hog stranger's "entries N" and
// its refusal, failing the test if it said neither.
func hogEntries(t *testing.T, s *stranger) (int, string) {
	t.Helper()
	got := s.until(t, "done")
	for i, line := range got {
		var n int
		if _, err := fmt.Sscanf(line, "entries %d", &n); err == nil && i+1 < len(got) {
			return n, got[i+1]
		}
	}
	t.Fatalf("the window-hog stranger said %q, and not how many entries it got", got)
	return 0, ""
}

// TestAWindowEntryFreedBehindAFaultedChannelComesBack: a stranger of
// another uid registers a page, faults its channel, unregisters the page
// and closes the channel, round after round, holding at most one page at
// a time; it must never be refused. Once it has gone (the daemon lists
// no client of it, and a second more), a fresh client of its uid must get
// as many window entries as a client got on the fresh daemon (its quota,
// abi.WindowSlots/2 by default), and then so must a client of another
// uid.
func TestAWindowEntryFreedBehindAFaultedChannelComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the victim must be of another uid than the stranger, which needs root")
	}
	victimCred := &syscall.Credential{Uid: strangerUID - 1, Gid: strangerUID - 1}
	d := startDaemon(t) // softgpud's default quotas: abi.WindowSlots/2 entries for a client and for a uid
	ctl, err := client.DialControl(d.node)
	require.NoError(t, err)
	defer ctl.Close()
	gone := func() {
		t.Helper()
		waitClients(t, ctl, 1) // only ctl: the stranger is torn down
		time.Sleep(time.Second)
	}
	// hog has a window-hog stranger register pages until it is refused,
	// and returns how many it got and how it was refused, once it has gone.
	hog := func(cred *syscall.Credential) (int, string) {
		t.Helper()
		s := startStranger(t, "window-hog", d.node, "", cred)
		n, why := hogEntries(t, s)
		s.kill()
		gone()
		return n, why
	}

	fresh, why := hog(victimCred)
	t.Logf("on the fresh daemon a client of uid %d got %d window entries, then %q", victimCred.Uid, fresh, why)
	require.Equal(t, abi.WindowSlots/2, fresh, "window entries a client got on the fresh daemon; want softgpud's default quota")

	s := startStranger(t, "window-fault-leak", d.node, "", cred)
	lines := s.findings(t)
	t.Logf("the stranger: %q", lines)
	assert.Equal(t, []string{fmt.Sprintf("rounds %d", abi.WindowSlots)}, lines,
		"a stranger holding one page at a time, each unregistered behind a channel it faulted and closed; want all %d rounds, never refused", abi.WindowSlots)
	gone()

	n, why := hog(cred)
	assert.Equal(t, fresh, n, "window entries a fresh client of the stranger's uid %d got, the stranger gone for a second; want as many as on the fresh daemon (it then said %q)", cred.Uid, why)
	d.live(t, "after the stranger")
	n, why = hog(victimCred)
	assert.Equal(t, fresh, n, "window entries a client of another uid (%d) got after the stranger; want as many as on the fresh daemon (it then said %q)", victimCred.Uid, why)
	d.live(t, "after the strangers")
	d.stop(t)
}
