package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
)

// Item 1 of the threat model, across processes: a command never reads or
// writes a page after its unmap returned, and memory named by queued work
// is not handed out again until that work has run. A stranger (A) queues
// a COPY behind DELAYs, so it is still queued, and frees the COPY's
// source or its destination; then a victim (B, another process) — or A
// itself — allocates and writes bytes of its own. A's COPY must fail, or
// deliver A's own bytes; it must never deliver B's bytes to A, nor land
// in B's memory or in A's next allocation.
//
// The two roles speak through the test: A says "freed" and waits for a
// line; B, which dialled first, says "ready", and on a line allocates and
// writes, says "written", and on another line checks its bytes. A then
// says whether its COPY was still queued when B wrote ("queued", else
// "ran early": the machine was too slow for the DELAYs, and the test
// tries again with longer ones), and how it ended.

func init() {
	strangerRoles["queue-free"] = queueThenFree
	strangerRoles["reuse"] = reuse
}

// unmapSize is the size of every buffer of these roles: 64 pages.
const unmapSize = 256 << 10

// The roles' bytes: A's source, A's destination before the COPY, B's
// buffers, and the byte A fills its allocation after the free with.
const (
	seedSource = 0xa1
	seedOld    = 0x0d
	seedB      = 0xb1
	seedNew    = 0xc1
)

// queueThenFree is the stranger A. Its argument is "what,delays": what it
// frees while the COPY is queued — "src" (the COPY's device source; its
// destination is host memory A reads without the device), "dst" (the
// COPY's device destination) or "dst-self" (the destination, then A
// allocates and writes again) — and how many DELAYs of 250 ms it queues
// in front of the COPY (each well under softgpud's 2 s watchdog).
func queueThenFree(node, arg string) error {
	what, n, _ := strings.Cut(arg, ",")
	delays, err := strconv.Atoi(n)
	if err != nil {
		return fmt.Errorf("argument %q: %w", arg, err)
	}
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	src, err := g.Alloc(unmapSize)
	if err != nil {
		return err
	}
	if err := g.Write(src, pattern(seedSource, unmapSize)); err != nil {
		return err
	}
	host, err := g.HostAlloc(unmapSize) // A's window on its bytes: no channel needed to read it
	if err != nil {
		return err
	}
	copy(host.Bytes(), pattern(seedOld, unmapSize))
	dst := host.Ptr()
	if what != "src" {
		if dst, err = g.Alloc(unmapSize); err != nil {
			return err
		}
		if err := g.Write(dst, pattern(seedOld, unmapSize)); err != nil {
			return err
		}
	}
	// A second copy channel, for A's own work while the COPY waits in
	// the first: it runs beside the DELAYs.
	side, err := g.NewChannel(client.Copy, client.ChannelOptions{Priority: softgpu.PriorityNormal})
	if err != nil {
		return err
	}
	b := g.NewBatch(client.Copy)
	for range delays {
		b.Delay(uint64(250 * time.Millisecond))
	}
	b.Copy(dst, src, unmapSize)
	pending, err := b.Submit()
	if err != nil {
		return err
	}
	freed := dst
	if what == "src" {
		freed = src
	}
	if err := g.Free(freed); err != nil {
		return fmt.Errorf("Free with the COPY queued: %w", err)
	}
	var again client.Ptr
	if what == "dst-self" {
		if again, err = g.Alloc(unmapSize); err != nil {
			return fmt.Errorf("Alloc after the Free: %w", err)
		}
		if err := side.Fill(again, unmapSize, seedNew); err != nil {
			return fmt.Errorf("Fill after the Free: %w", err)
		}
		fmt.Printf("same VA %v\n", again == dst)
	}
	fmt.Println("freed")
	if err := waitLine(); err != nil {
		return err
	}
	// Was the COPY still queued when B wrote? A wait that may not wait
	// says: it returns the context's error while the fence is not there.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pending.WaitContext(now); errors.Is(err, context.Canceled) {
		fmt.Println("queued")
	} else {
		fmt.Println("ran early")
	}
	err = pending.Wait()
	if err == nil {
		fmt.Println("copy ok")
	} else {
		fmt.Println("copy failed")
	}
	switch what {
	case "src":
		fmt.Println("destination " + whose(host.Bytes()))
	case "dst-self":
		// A COPY that faulted faults A's context too, and then nothing
		// of A's runs: its new allocation is out of reach, and the COPY
		// did not touch it.
		if err := side.Copy(host.Ptr(), again, unmapSize); err != nil {
			fmt.Println("new allocation unreadable")
		} else {
			fmt.Println("new allocation " + whose(host.Bytes()))
		}
	}
	fmt.Println("done")
	return nil
}

// whose says whose bytes b holds: one of the roles' patterns, whole, or
// the first page that holds B's bytes, or "other".
func whose(b []byte) string {
	for _, s := range []struct {
		name string
		seed byte
	}{{"A's source", seedSource}, {"A's old", seedOld}, {"B's", seedB}} {
		if firstDiff(b, pattern(s.seed, len(b))) < 0 {
			return s.name
		}
	}
	if !slices.ContainsFunc(b, func(v byte) bool { return v != seedNew }) {
		return "A's new"
	}
	theirs := pattern(seedB, len(b))
	for off := 0; off < len(b); off += 4096 {
		if firstDiff(b[off:off+4096], theirs[off:off+4096]) < 0 {
			return fmt.Sprintf("B's at page %d", off/4096)
		}
	}
	return "other"
}

// reuse is the victim B: it dials, says "ready", and on the test's line
// allocates up to arg buffers of unmapSize (stopping at the first
// refusal), writes its bytes into each, says "written", and on the next
// line reads each back: "intact N", or where it was overwritten.
func reuse(node, arg string) error {
	most, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	fmt.Println("ready")
	if err := waitLine(); err != nil {
		return err
	}
	mine := pattern(seedB, unmapSize)
	var bufs []client.Ptr
	for range most {
		p, err := g.Alloc(unmapSize)
		if err != nil {
			break
		}
		if err := g.Write(p, mine); err != nil {
			return err
		}
		bufs = append(bufs, p)
	}
	fmt.Println("written")
	if err := waitLine(); err != nil {
		return err
	}
	got := make([]byte, unmapSize)
	for i, p := range bufs {
		if err := g.Read(got, p); err != nil {
			return err
		}
		if j := firstDiff(got, mine); j >= 0 {
			fmt.Printf("buffer %d overwritten at byte %d: %s\n", i, j, whose(got))
			fmt.Println("done")
			return nil
		}
	}
	fmt.Printf("intact %d\n", len(bufs))
	fmt.Println("done")
	return nil
}

func TestAFreedBufferIsNeverUsedForItsNextOwner(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	for _, tc := range []struct {
		name, what string
		victim     bool // B allocates and writes after A's free
	}{
		{"source freed, B reuses", "src", true},
		{"destination freed, B reuses", "dst", true},
		{"destination freed, A reuses", "dst-self", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for delays := 4; ; delays *= 2 {
				var b *stranger
				if tc.victim {
					b = startStranger(t, "reuse", d.node, "32", nil)
					b.until(t, "ready")
				}
				a := startStranger(t, "queue-free", d.node, fmt.Sprintf("%s,%d", tc.what, delays), cred)
				for _, line := range a.until(t, "freed") {
					t.Logf("A: %s", line)
				}
				if b != nil {
					fmt.Fprintln(b.stdin, "go")
					b.until(t, "written")
				}
				d.live(t, "with A's COPY queued")
				fmt.Fprintln(a.stdin, "go")
				got := a.findings(t)
				if len(got) == 0 || got[0] == "ran early" {
					if delays >= 16 {
						t.Fatalf("A's COPY ran before B wrote even behind %d DELAYs of 250 ms: A said %q", delays, got)
					}
					t.Logf("A's COPY ran before B wrote behind %d DELAYs (a loaded machine); again with more", delays)
					if b != nil {
						b.cmd.Process.Kill() // its memory back for the next B
						b.cmd.Wait()
					}
					continue
				}
				t.Logf("A: %q", got)
				for _, line := range got[1:] {
					if strings.Contains(line, "B's") || strings.Contains(line, "other") {
						t.Errorf("A's COPY, queued before its Free: %s", line)
					}
					if line == "new allocation A's source" {
						t.Errorf("A's COPY, queued before the Free of its destination, landed in A's next allocation")
					}
				}
				if tc.what == "dst-self" && !slicesContainsAny(got, "new allocation A's new") &&
					!(slicesContainsAny(got, "copy failed") && slicesContainsAny(got, "new allocation unreadable")) {
					t.Errorf("A's allocation after the Free: A said %q; want A's new bytes in it, or the COPY failed and A's context with it", got)
				}
				if tc.what == "src" && !slicesContainsAny(got, "copy failed", "destination A's source") {
					t.Errorf("A's COPY from a freed source: A said %q; want it failed, or A's own bytes delivered", got)
				}
				if b != nil {
					fmt.Fprintln(b.stdin, "check")
					for _, line := range b.findings(t) {
						if !strings.HasPrefix(line, "intact") {
							t.Errorf("B, which allocated after A's Free: %s", line)
						}
						t.Logf("B: %s", line)
					}
				}
				return
			}
		})
		d.live(t, "after "+tc.name)
	}
	d.stop(t)
}

// slicesContainsAny reports whether lines holds any of want.
func slicesContainsAny(lines []string, want ...string) bool {
	for _, l := range lines {
		for _, w := range want {
			if l == w {
				return true
			}
		}
	}
	return false
}
