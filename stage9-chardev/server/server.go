// Package server is softgpud's core: it owns a device and the device-wide
// half of its driver, and serves them to client processes over a device
// node — a Unix SOCK_SEQPACKET socket at a path, standing in for
// /dev/dri/card0.
//
// A client's life on the node:
//
//	client                                   daemon (a goroutine per client)
//	------                                   -------------------------------
//	connect                           ──►    accept; SO_PEERCRED: may it?
//	VERSION {3, 0}                    ──►    same major? then the device's shape
//	ATTACH                            ──►    a context of its own; the public
//	                                  ◄──    pages, a kick eventfd (for a client
//	                                         without futexes), an irq eventfd
//	CHANNEL_OPEN {engine, priority}   ──►    a channel in its context, not yet
//	                                  ◄──    served: two memfds, all hole (device.Share)
//	… maps both, touches every page …
//	CHANNEL_START {channel}           ──►    no hole? seal, reset, onto its runlist
//	                                         (device.Start)
//	ALLOC, HOST_REGISTER (a memfd)    ──►    memory in its context
//	… stores into its ring, a store to its doorbell: no message …
//	close, or exit, or kill -9        ──►    channels off their runlists and
//	                                         unshared, memory reclaimed
//
// Control calls are messages (package uapi); the data path is not. A
// client submits by stores into memory the engines read and waits by
// loads of memory the engines write, with the daemon's driver on neither
// path. The two sides wake each other on the data path only when the
// other said it needs it: the client calls FUTEX_WAKE on the doorbell it
// stored when the engine it rang was asleep (RegNeedWakeup, idle gating;
// the engine sleeps on that word, device/kick.go), and an engine
// that completes a fence a waiter of the client armed (RegIrqArm) wakes
// that waiter with a futex wake of the fence word, where it sleeps
// (device.FenceVector). The irq eventfd carries the rest: a channel's
// fault, the device stopping.
//
// Nothing a client sends or stores is trusted. A call is decoded by
// uapi.DecodeCall, which rejects every malformed message with an errno; a
// client may only name its own channels and allocations; its memfds are
// mapped only if sealed against shrinking; the engines validate every
// doorbell and descriptor in its pages and fault its channel, not the
// device; and when it goes, however it goes, its channels are stopped
// before its memory is given back.
//
// The locks of managed memory's pager, outermost first; a lock is only
// ever taken with those above it held, never below:
//
//	c.pg.mu      a client's pagers and kept memfds (managedPager holds it
//	             while it starts the fault loop and a punch helper)
//	p.serving    one pager's reads of its userfaultfd (serveReady); its
//	             stopped flag
//	um.mu        the driver's managed memory: every move of a page, so
//	             every bounded call the driver makes
//	faultsMu, l.mu, pu.mu, p.calls
//	             leaves but for pu.mu → h.mu (a helper's clock) and
//	             p.calls → pagerBars.mu (the uids' shares and bars)
//
// So um.mu is never held while p.serving is taken: stopPager removes a
// pager from the fault loop (which waits for serving) before SetPager
// takes um.mu, and the fault loop answers under serving, then um.mu.
// quotaMu and s.mu are leaves too, and so is hangBars.mu; strikeHang
// takes it, s.mu, each of a uid's clients' c.mu and the driver's vm.mu
// one at a time.
package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/trace"
	"softgpu/stage9-chardev/uapi"
)

// Config configures a daemon.
type Config struct {
	// Node is the path of the device node; uapi.DefaultNode() if empty. A
	// stale socket there (no daemon answering) is replaced; a live one is
	// an error.
	Node string
	// Mode is the node's permission bits: who may connect, checked
	// against each client's credentials (SO_PEERCRED). Zero means 0600:
	// the daemon's own user.
	Mode os.FileMode
	// Device and Driver configure the device the daemon owns; their
	// Trace and Shared are the daemon's to set. A Driver.Idle left zero
	// means the hybrid mode with DefaultIdleBudget, not the in-process
	// device's 50 µs.
	Device device.Config
	Driver driver.Config
	// Trace, if not empty, is a file the daemon writes the device's trace
	// to when it closes (Chrome trace-event JSON, as the in-process
	// Config.Trace): every client's commands on the engines and channels,
	// and on the driver's track each client's attach and detach. It keeps
	// the latest TraceEvents events (0: trace.DefaultEvents).
	Trace       string
	TraceEvents int
	// MaxConnsPerUID is the most connections one uid may hold open at
	// once, and AttachTimeout how long a connection that has not
	// attached may go without a call before it is dropped (conns.go).
	// Zero means DefaultMaxConnsPerUID and DefaultAttachTimeout.
	MaxConnsPerUID int
	AttachTimeout  time.Duration
	// ClientQuota is the most of each device-wide pool one client may
	// hold, UidQuota the most all the clients of one uid may hold
	// together (quota.go); past either a call fails with uapi.ErrQuota.
	// Zero fields mean the defaults, which let one client alone use the
	// whole device but for the DMA window, of which no quota may grant
	// every entry.
	ClientQuota, UidQuota Quota
	// PriorityUIDs are the users, besides root, who may open channels
	// above abi.PriorityNormal or with a timeslice of their own
	// (grant.go); everyone else gets uapi.ErrPerm for asking.
	PriorityUIDs []uint32
	// Log receives the daemon's log; nil means a text logger on stderr.
	Log *slog.Logger
	// WriteTimeout bounds how long a reply may wait for a client that
	// does not read its socket; past it the client is dropped. Zero
	// means 5 s.
	WriteTimeout time.Duration
}

// Server is a running daemon.
type Server struct {
	cfg   Config
	dev   *device.Device
	drv   *driver.Driver
	ln    *net.UnixListener
	node  string
	log   *slog.Logger
	trace *trace.Buffer // nil unless Config.Trace

	mu      sync.Mutex
	clients []*client // in connection order: CLIENT_INFO's index
	closing bool
	lost    error // why the node no longer reaches the daemon (watch.go)

	nodeFile os.FileInfo // the socket New bound at node (watch.go)

	// quotaMu guards every client's use and the uids' (quota.go); it is
	// a leaf lock.
	quotaMu     sync.Mutex
	uidUse      map[uint32]*uapi.Pools // by uid: the sum of its clients' use
	clientLimit uapi.Pools             // Config.ClientQuota, defaults filled; fixed after New
	uidLimit    uapi.Pools             // Config.UidQuota, likewise

	// orphaned, by uid, counts channels of clients gone whose files are
	// still held (linger.go); quotaMu guards it too.
	orphaned map[uint32]uint32
	linger   *linger // closed channels' files, until their last holder lets go (linger.go)

	// owed are the charges for what clients freed and the driver still
	// holds, and turns, by uid, when its refused calls may next have the
	// driver give back (owed.go); quotaMu guards them too. settles counts
	// the times settle has asked the driver: what refused calls cost it,
	// for the tests that bound that.
	owed    []*owed
	turns   map[uint32]*settleTurn
	settles atomic.Uint64

	// faultsMu guards faults, the fault loop of every client's pagers
	// (faultloop.go), started with the first.
	faultsMu sync.Mutex
	faults   *faultLoop
	bars     pagerBars // the uids barred from the pager (pager.go)
	hangs    hangBars  // the uids barred from new contexts after an engine reset under a command of theirs (hangbars.go)
	punches  puncher   // the pager's punch helpers (punch.go)

	messages atomic.Uint64 // messages received from every client
	serving  sync.WaitGroup
	closed   chan struct{}
	once     sync.Once
}

// ErrNodeBusy reports a node path where another daemon is answering.
var ErrNodeBusy = errors.New("softgpu: a daemon is already serving this node")

// ANCHOR: budget

// DefaultIdleBudget is how long the daemon's engines spin, in cycles,
// before they sleep: 100 µs. Stage 7's rule sets a hybrid budget to about
// what the wake it avoids costs — spin longer and the spin costs more than
// the sleep would have; shorter, and the next command pays for a wake that
// a little more spinning would have saved. In-process, the wake is the
// driver handing its thread to the engine; here it is a client's kick,
// which must wake a thread of the daemon asleep in the kernel. When this
// was chosen the kick was an eventfd write read by a goroutine of the
// daemon, and on the measured machine that cost about 80 µs on average,
// with a long tail, against 8 µs in-process (Boundary/op=wake3ms's mean-ns
// in the chardev record taken at d081839, before uapi 2.2: git show
// 109a2a3:book/records/chardev.json); 100 µs is that, rounded up. Since 2.2 the client's FUTEX_WAKE
// wakes the engine itself, asleep in futex_waitv (device/kick.go), and
// the chardev record taken at 885b3ad put that row's median near 30 µs,
// 1.26 times the bare cross-process futex wake measured beside it, and
// the in-process row's near 11 µs. The budget stays at 100 µs all the same, for the
// other half of the rule: the gaps a client leaves. A client copying a
// megabyte leaves about 60 µs between its commands — the time to write
// the megabyte and be woken for the last copy — and record
// chardev-budget50 (SOFTGPU_IDLE_BUDGET=50000, the in-process budget on
// both sides, same commit) shows what 50 µs does to it: the daemon's
// engine was asleep at 0.11 to 0.82 of those commands, pass by pass,
// against at most 0.03 at 100 µs; each of those paid a kick, and the copy
// across the boundary fell below the in-process one in four passes of
// five and was level with it in the other.
const DefaultIdleBudget = 100_000

// ANCHOR_END: budget

// New opens a device and its driver and listens on the node. Serve then
// accepts clients.
func New(cfg Config) (*Server, error) {
	if cfg.Node == "" {
		cfg.Node = uapi.DefaultNode()
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
	}
	for _, q := range []struct {
		name  string
		quota Quota
	}{{"client", cfg.ClientQuota}, {"uid", cfg.UidQuota}} {
		if err := checkQuota(q.name, q.quota); err != nil {
			return nil, err
		}
	}
	if cfg.MaxConnsPerUID == 0 {
		cfg.MaxConnsPerUID = DefaultMaxConnsPerUID
	}
	if cfg.AttachTimeout == 0 {
		cfg.AttachTimeout = DefaultAttachTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.Driver.Idle == (driver.Idle{}) {
		cfg.Driver.Idle = driver.Idle{Mode: driver.IdleHybrid, Budget: DefaultIdleBudget}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var tb *trace.Buffer
	if cfg.Trace != "" {
		if fi, err := os.Stat(filepath.Dir(cfg.Trace)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("trace %q: %s is not a directory", cfg.Trace, filepath.Dir(cfg.Trace))
		}
		tb = trace.New(cfg.TraceEvents)
	}
	cfg.Device.Trace, cfg.Device.Shared = tb, true
	ln, err := listen(cfg.Node, cfg.Mode)
	if err != nil {
		return nil, err
	}
	dev, err := device.Open(cfg.Device)
	if err != nil {
		ln.Close()
		return nil, err
	}
	drv, err := driver.New(dev, cfg.Driver)
	if err != nil {
		dev.Close()
		ln.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, dev: dev, drv: drv, ln: ln, node: cfg.Node, log: cfg.Log, closed: make(chan struct{}), trace: tb,
		uidUse: map[uint32]*uapi.Pools{}, turns: map[uint32]*settleTurn{}}
	if s.nodeFile, err = os.Lstat(cfg.Node); err != nil {
		drv.Close()
		dev.Close()
		ln.Close()
		return nil, fmt.Errorf("softgpu: the node it just bound: %w", err)
	}
	s.orphaned = map[uint32]uint32{}
	if s.linger, err = newLinger(s); err != nil {
		drv.Close()
		dev.Close()
		ln.Close()
		return nil, err
	}
	tablesFree := drv.TablePoolFree() // the driver's own tables made, no client's yet
	s.cfg.ClientQuota = defaultQuota(cfg.ClientQuota, drv.MemorySize(), tablesFree, true)
	s.cfg.UidQuota = defaultQuota(cfg.UidQuota, drv.MemorySize(), tablesFree, false)
	s.clientLimit, s.uidLimit = s.cfg.ClientQuota.pools(), s.cfg.UidQuota.pools()
	s.log.Info("device open", "node", cfg.Node, "memory", drv.MemorySize(), "mode", fmt.Sprintf("%#o", cfg.Mode))
	s.log.Info("quotas", "client", fmt.Sprintf("%+v", s.cfg.ClientQuota), "uid", fmt.Sprintf("%+v", s.cfg.UidQuota))
	return s, nil
}

// listen makes the node: the directory if missing (0700) and checked
// (makeNodeDir), a stale socket removed, the socket bound and given mode.
func listen(node string, mode os.FileMode) (*net.UnixListener, error) {
	if err := makeNodeDir(node); err != nil { // node.go: nobody else's path
		return nil, err
	}
	if c, err := net.Dial("unixpacket", node); err == nil {
		c.Close()
		return nil, fmt.Errorf("%w: %s", ErrNodeBusy, node)
	}
	os.Remove(node) // stale: a daemon that died without removing it
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("softgpu: listening on %s: %w", node, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(node, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("softgpu: chmod %s: %w", node, err)
	}
	return ln, nil
}

// Node returns the path the daemon serves.
func (s *Server) Node() string { return s.node }

// Messages returns how many messages the daemon has received from all
// clients: every control call is one; a submission is none.
func (s *Server) Messages() uint64 { return s.messages.Load() }

// Serve accepts clients until Close; it returns nil then, or the error
// that stopped it (ErrNodeLost when no client can reach it: watch.go).
func (s *Server) Serve() error {
	burst, lastLog := 0, time.Time{} // accepts in a row that found no resources, and when one last did (conns.go)
	s.serving.Go(s.watchNode)
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.closed:
				return nil
			default:
			}
			s.mu.Lock()
			lost := s.lost
			s.mu.Unlock()
			if lost != nil {
				return lost
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if s.acceptBackoff(err, &burst, &lastLog) {
				continue
			}
			return err
		}
		burst = 0
		c, err := s.admit(conn)
		if err != nil {
			s.log.Warn("client refused", "err", err)
			continue
		}
		s.serving.Go(func() { c.serve() })
	}
}

// admit checks a new connection's credentials and registers it.
func (s *Server) admit(conn *net.UnixConn) (*client, error) {
	cred, err := peerCred(conn)
	if err != nil {
		closeConn(conn) // discard.go: it may have queued messages already
		return nil, err
	}
	c := &client{s: s, conn: conn, pid: uint32(cred.Pid), uid: cred.Uid, gid: cred.Gid, irqFD: -1}
	c.allowed = s.mayConnect(cred)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		closeConn(conn) // discard.go: it may have queued messages already
		return nil, errors.New("the daemon is shutting down")
	}
	if err := s.admitConn(cred.Uid); err != nil { // conns.go
		closeConn(conn) // discard.go: it may have queued messages already
		return nil, err
	}
	s.clients = append(s.clients, c)
	return c, nil
}

// peerCred returns the credentials of the process at the other end.
func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}

// mayConnect applies the node's owner and mode to a client's credentials,
// as the kernel applies a device node's to open(2): the owner's bits for
// the owner, the group's for its group, the others' for everyone else;
// connecting needs read and write. Root may always.
func (s *Server) mayConnect(cred *unix.Ucred) bool {
	if cred.Uid == 0 {
		return true
	}
	var st unix.Stat_t
	if err := unix.Stat(s.node, &st); err != nil {
		return false
	}
	mode := uint32(s.cfg.Mode.Perm())
	var bits uint32
	switch {
	case cred.Uid == st.Uid:
		bits = mode >> 6
	case cred.Gid == st.Gid:
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&6 == 6
}

// remove forgets a client that has gone.
func (s *Server) remove(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.clients {
		if x == c {
			s.clients = append(s.clients[:i:i], s.clients[i+1:]...)
			return
		}
	}
}

// Close shuts the daemon down: no new clients; every client's connection
// is closed, so each sees the device go (its calls fail, its waits
// settle); each client's channels are stopped and its memory reclaimed;
// then the device stops and the node is removed. It returns once all of
// that is done.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		s.punches.close() // a punch in flight fails now, and lets um.mu go for the teardowns (punch.go)
		s.mu.Lock()
		s.closing = true
		clients := append([]*client(nil), s.clients...)
		s.mu.Unlock()
		s.ln.Close()
		for _, c := range clients {
			hangUp(c.conn) // its serve loop sees EOF and tears it down
		}
		s.serving.Wait()
		s.stopFaultLoop() // every pager was stopped with its client
		s.linger.close()  // every client is gone: what its files still cost dies with the daemon
		err = s.drv.Close()
		s.dev.Close()
		s.log.Info("device closed", "node", s.node)
		if s.trace != nil {
			if terr := s.trace.WriteFile(s.cfg.Trace, stageName); terr != nil {
				s.log.Error("writing the trace", "file", s.cfg.Trace, "err", terr)
				err = errors.Join(err, fmt.Errorf("writing the trace: %w", terr))
			} else {
				s.log.Info("trace written", "file", s.cfg.Trace, "events", len(s.trace.Events()))
			}
		}
	})
	return err
}

// stageName is the stage this daemon is built from, for the trace: the
// module's last path element (derived, so a copied-out stage names itself).
var stageName = func() string {
	path := reflect.TypeFor[Server]().PkgPath() // .../STAGE/server
	path = path[:strings.LastIndex(path, "/")]
	return path[strings.LastIndex(path, "/")+1:]
}()

// isClosedConn reports whether err says the connection is gone, as
// opposed to a malformed message.
func isClosedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
