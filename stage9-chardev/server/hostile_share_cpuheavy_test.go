package server_test

import (
	"fmt"
	"testing"
)

// The share (pagerShare) judges a uid whose calls into its memory wait
// more than a shareLeak-th of the time. Its first version charged
// each call its wall time, assuming "a well-behaved client's calls take
// microseconds" — but a client that works its managed memory without
// pause makes the pager's calls its main work: the UFFDIO_COPY of every
// page the host reads, the punch of every page the device takes. That
// time is the client's own work, not a lock it holds, and a red team's
// busy client, alone on the machine, was dropped within a second. The
// share now charges only what a call waited asleep (offCPU).

// TestABusyClientAloneKeepsItsShare: no stranger at all. A
// well-behaved client (uid 1000) goes round a paged allocation of
// RT_VICTIM_MIB (default 8) MiB for 6 s with no pause: the device fills
// it, the host reads it back. It holds none of its locks; the pager's
// calls are its work. It must not be dropped, nor its uid barred.
func TestABusyClientAloneKeepsItsShare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if cred, _ := strangerCred(); cred == nil {
		t.Skip("the victim runs as uid 1000: only root can make it so")
	}
	mib := rtInt("RT_VICTIM_MIB", 8)
	d := startDaemon(t)
	lines, ended := runVictim(t, d, fmt.Sprintf("%d 6 0s", mib), nil)
	judgedVictim(t, d, lines, ended)
	d.stop(t)
}

// TestCPULoadBarsNoBusyClient: a lighter well-behaved client —
// 1 MiB a lap, 20 ms between laps, which alone is never judged — while a
// uid-65534 process spins RT_HOG_THREADS (default 400) threads. The
// daemon's threads, and its punch helper, kept from their CPU mid-call by
// another uid's spinners, are charged to the victim's share. It must not
// be dropped, nor its uid barred. RT_HOG_THREADS=0 is the control.
func TestCPULoadBarsNoBusyClient(t *testing.T) {
	threads := rtInt("RT_HOG_THREADS", 400)
	underLoad(t, rtString("RT_VICTIM_ARG", "1 6 20ms"), "cpuhog", false, fmt.Sprintf("%d 10", threads),
		fmt.Sprintf("a %d-thread CPU hog", threads))
}
