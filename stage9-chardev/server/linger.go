package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/uapi"
)

// A closed channel whose files a client still holds counts against its
// Channels quota.
//
// CHANNEL_OPEN hands the client two new memfds (device.Share): the user
// one (doorbell page, submission ring) and the status one (status page,
// completion ring). Since CHANNEL_START (3.0) their pages are the
// client's: the daemon writes none of them before the client has
// allocated every one, from its own process, and no hole can be punched
// in a started channel's files after (device/shared.go, Start). What a
// client keeps of them — the files, or their pages in a pipe after the
// files have gone (splice(2) holds them: TestAStrangerCannotKeepThe
// DaemonsPagesInPipes) — is memory it allocated itself, as it could with
// memfds of its own. Before 3.0 the daemon wrote the pages, and so
// allocated them: a stranger that opened and closed one channel 2500
// times, keeping the descriptors, held 30 MiB of the daemon's memory
// while holding no channel (TestAStrangerCannotKeepTheDaemonsMemoryAfter
// ClosingItsChannels). What each file still costs the daemon is an
// inode, and a watch here; and the daemon cannot take back what it
// handed out: there is no revoke for a descriptor. So a channel still
// counts against the client's and its uid's Channels quota from
// CHANNEL_OPEN until both: it has been given back (CHANNEL_CLOSE, or
// teardown), and both its files are gone. A
// client that keeps them is refused new channels at its quota, and gets
// them back as it lets go; its uid keeps the charge after the client
// itself has gone (quota.go, orphaned). The client library lets go at
// CHANNEL_CLOSE: it replaces its mappings of both files with private
// copies (client/hardware.go, unmapChannel), so a well-behaved client's
// closed channel stops counting as soon as the daemon hears of it.
//
// How the daemon hears: an inotify watch on each file, added through
// /proc/self/fd while the daemon still holds it. A memfd is an unlinked
// file, so when its last descriptor and last mapping go — the client's
// and the daemon's alike; the device maps both files until Unshare — its
// inode goes, and the watch with it: IN_DELETE_SELF, then IN_IGNORED,
// the last event of every watch, whatever ended it. The close(2) or
// munmap(2) that drops the last reference queues the event before it
// returns to the client, so a client that lets go and then opens a
// channel finds its event queued: CHANNEL_OPEN reads every queued event
// (drain) before it charges, and is never refused for a file let go
// before it was called.
//
// Invariant, under l.mu: every held record is in watches once per file
// still alive (files of them), and is in neither watches nor any
// client's holds once it has been refunded; a record is refunded exactly
// once, when closed && files == 0.
type linger struct {
	s      *Server
	notify int // the inotify instance: non-blocking, read only under mu
	stop   int // an eventfd: Close writes it, and lingerLoop returns
	done   chan struct{}

	mu      sync.Mutex
	watches map[int32]*held // by watch descriptor
}

// held is one channel a client opened: what its files still cost.
type held struct {
	owner  *client // nil once the client has gone: then the charge is its uid's alone (quota.go, orphaned)
	uid    uint32
	files  int  // of the channel's two files, how many are still alive
	closed bool // the channel has been given back
}

// newLinger makes the inotify instance and starts the goroutine that
// reads it.
func newLinger(s *Server) (*linger, error) {
	l, err := openLinger(s)
	if err != nil {
		return nil, err
	}
	go l.lingerLoop()
	return l, nil
}

// openLinger makes the inotify instance, and no goroutine: events are
// read only by drain until lingerLoop runs.
func openLinger(s *Server) (*linger, error) {
	notify, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("softgpu: inotify_init1: %w", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(notify)
		return nil, fmt.Errorf("softgpu: eventfd: %w", err)
	}
	return &linger{s: s, notify: notify, stop: stop, done: make(chan struct{}), watches: map[int32]*held{}}, nil
}

// lingerLoop refunds the channels whose files go while no call of their
// client is looking: it sleeps in poll(2) on the inotify instance and the
// stop eventfd, and reads what came. It pairs with drain, which reads the
// same instance from a client's call; both read under mu, so each event
// is handled once and in order, whichever reads it. A thread asleep in
// poll(2) holds no lock, so nothing waits on it; close wakes it with the
// stop eventfd, the only way it returns, and waits for it: the daemon's
// Close (and so SIGTERM) is never held up by it for longer than one
// round of reading.
func (l *linger) lingerLoop() {
	defer close(l.done)
	fds := []unix.PollFd{{Fd: int32(l.notify), Events: unix.POLLIN}, {Fd: int32(l.stop), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			l.s.log.Error("inotify poll", "err", err) // cannot happen with two good descriptors; the drains still count
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			l.drain()
		}
	}
}

// close stops lingerLoop and closes the descriptors. Whatever records
// remain die with the daemon.
func (l *linger) close() {
	one := [8]byte{1}
	unix.Write(l.stop, one[:])
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	unix.Close(l.notify)
	unix.Close(l.stop)
	l.notify, l.stop = -1, -1
}

// watch starts counting a channel just opened for owner, whose files
// the daemon still holds (and maps). An error wraps uapi.ErrNoMemory: the
// daemon is out of inotify watches, and the caller closes the channel.
func (l *linger) watch(owner *client, files device.ChannelFiles) (*held, error) {
	h := &held{owner: owner, uid: owner.uid}
	l.mu.Lock()
	defer l.mu.Unlock()
	var wds []int32
	for _, f := range []*os.File{files.User, files.Status} {
		wd, err := unix.InotifyAddWatch(l.notify, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.IN_DELETE_SELF)
		runtime.KeepAlive(f)
		if err != nil {
			for _, wd := range wds {
				delete(l.watches, wd) // its IN_IGNORED, when rm_watch sends it, finds no record
				unix.InotifyRmWatch(l.notify, uint32(wd))
			}
			return nil, fmt.Errorf("watching %s for its last holder: %v: %w", f.Name(), err, uapi.ErrNoMemory)
		}
		wds = append(wds, int32(wd))
		l.watches[int32(wd)] = h
		h.files++
	}
	return h, nil
}

// closed records that h's channel has been given back; it is refunded now
// if its files are gone already, else when they go.
func (l *linger) closed(h *held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.closed = true
	l.refundLocked(h)
}

// orphan hands the charges of c's channels whose files are still held to
// c's uid: c is going (teardown), and every one of its channels has been
// given back. After it, no refund of the linger's reaches c.
func (l *linger) orphan(c *client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.watches { // a record is here once per live file: the first visit moves it
		if h.owner == c {
			if !h.closed {
				panic("server: invariant broken: a client's channel left open at its teardown")
			}
			h.owner = nil
			c.orphan(1)
		}
	}
}

// heldClosed is how many channels of c's, and of its uid's clients
// (those gone included), have been given back but still count, their
// files held: what a quota refusal tells the client.
func (l *linger) heldClosed(c *client) (client, uid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[*held]bool{}
	for _, h := range l.watches {
		if h.uid != c.uid || !h.closed || seen[h] {
			continue
		}
		seen[h] = true
		uid++
		if h.owner == c {
			client++
		}
	}
	return client, uid
}

// drain reads every event queued on the instance and refunds what they
// end. A client's call runs it before it charges a channel (see above);
// lingerLoop, when the instance is readable.
func (l *linger) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notify < 0 {
		return
	}
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	for {
		n, err := unix.Read(l.notify, buf)
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more queued
		}
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int32(binary.NativeEndian.Uint32(b[0:4]))
			mask := binary.NativeEndian.Uint32(b[4:8])
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
			b = b[min(size, len(b)):]
			switch {
			case mask&unix.IN_Q_OVERFLOW != 0:
				l.reconcileLocked()
			case mask&unix.IN_IGNORED != 0:
				l.endedLocked(wd)
			}
		}
	}
}

// endedLocked is watch wd's end: its file is gone.
func (l *linger) endedLocked(wd int32) {
	h, ok := l.watches[wd]
	if !ok {
		return // a watch undone in watch, or ended in reconcileLocked already
	}
	delete(l.watches, wd)
	h.files--
	l.refundLocked(h)
}

// refundLocked gives back h's channel once it is closed and its files
// are gone: to its client while it lives, else to its uid.
func (l *linger) refundLocked(h *held) {
	if !h.closed || h.files > 0 {
		return
	}
	if h.owner != nil {
		h.owner.refund(uapi.Pools{Channels: 1})
		return
	}
	l.s.refundOrphan(h.uid)
}

// reconcileLocked recovers from a queue that overflowed (more than
// max_queued_events unread): events were dropped, IN_IGNORED among them,
// so the watches the kernel still has are read from the instance's
// fdinfo, and every one of ours it no longer lists has ended. Only an
// event queued after the overflow can follow, and it finds its record
// gone.
func (l *linger) reconcileLocked() {
	live, err := liveWatches(l.notify)
	if err != nil {
		l.s.log.Error("inotify queue overflowed and its watches cannot be read: closed channels stay charged", "err", err)
		return
	}
	for wd := range l.watches {
		if !live[wd] {
			l.endedLocked(wd)
		}
	}
}

// liveWatches returns the watch descriptors the kernel holds for
// instance fd: /proc/self/fdinfo/FD has a line per watch,
// "inotify wd:WD ino:... sdev:... mask:...", WD in hex.
func liveWatches(fd int) (map[int32]bool, error) {
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return nil, err
	}
	live := map[int32]bool{}
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		var wd int32
		if _, err := fmt.Sscanf(sc.Text(), "inotify wd:%x", &wd); err == nil {
			live[wd] = true
		}
	}
	return live, sc.Err()
}
