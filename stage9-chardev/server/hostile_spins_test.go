package server_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// Red-team finding 5: a stranger with a context and a channel on each
// engine runs a SPIN (a command with no preemption point) on both, and
// again on a fresh context each time the watchdog has reset the engines.
// The watchdog asks a command to stop at its limit (softgpud's default,
// 2 s) and resets the engine a limit later (device/watchdog.go), so each
// round holds both engines about 4 s; nothing stopped the next round, and
// a well-behaved client's life on the daemon took up to 4 s, past
// liveBound, for as long as the stranger liked.
//
// The first round cannot be helped: until the watchdog has reset an
// engine under the stranger's SPIN, nothing tells it from a long shader
// (a SPIN is a valid command), and the reset is 2 s plus a limit after
// it began. What the daemon can do is not let the stranger's uid start
// another (hangbars.go). So these tests let the first round run
// out, and then require every well-behaved probe to be live within
// liveBound for longer than a second round would hold the engines, and
// the stranger to have been refused.

func init() {
	strangerRoles["spins"] = spinsRole
	strangerRoles["innocent"] = innocentRole
}

// spinner is a stranger's connection with a context and a channel on
// each engine, mapped by hand as rawChannel does.
type spinner struct {
	sock  *net.UnixConn
	ctx   abi.Context
	kick  int
	chans []spinChannel
}

// spinChannel is one of a spinner's channels.
type spinChannel struct {
	id           uint32 // its number, for CHANNEL_CLOSE
	user, status []byte
	mask, head   uint64 // head: the slot of its next SPIN; the doorbell as the channel was handed over, until a finite-spins round moves it on
}

// dialSpinner connects, attaches and opens a channel on each engine. On
// failure it returns the name of the call that failed.
func dialSpinner(node string) (*spinner, string, error) {
	sp, call, err := dialAttached(node)
	if err != nil {
		return nil, call, err
	}
	for e := range uint32(abi.NumEngines) {
		if call, err := sp.open(e); err != nil {
			sp.close()
			return nil, call, err
		}
	}
	return sp, "", nil
}

// dialAttached connects and attaches: a spinner with no channel yet. On
// failure it returns the name of the call that failed.
func dialAttached(node string) (*spinner, string, error) {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return nil, "connect", err
	}
	sp := &spinner{sock: sock}
	if _, err := strangerCall(sock, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		sock.Close()
		return nil, "VERSION", err
	}
	att := &uapi.Attach{}
	fds, err := strangerCall(sock, att)
	if err != nil {
		sock.Close()
		return nil, "ATTACH", err
	}
	sp.ctx, sp.kick = abi.Context(att.Context), fds[uapi.AttachFDKick]
	unix.Close(fds[uapi.AttachFDPublic])
	unix.Close(fds[uapi.AttachFDIrq])
	return sp, "", nil
}

// open opens a channel on engine e and maps it, as the spinner's last.
// On failure it returns the name of the call that failed.
func (sp *spinner) open(e uint32) (string, error) {
	co := &uapi.ChannelOpen{Engine: e, Priority: abi.PriorityNormal}
	fds, err := strangerCall(sp.sock, co)
	if err != nil {
		return "CHANNEL_OPEN", err
	}
	defer unix.Close(fds[uapi.ChannelFDUser]) // the mappings keep the pages
	defer unix.Close(fds[uapi.ChannelFDStatus])
	user, err := unix.Mmap(fds[uapi.ChannelFDUser], 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return "mmap", err
	}
	status, err := unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(co.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(user)
		return "mmap", err
	}
	if err := populateMapped(user, status); err != nil { // hostile_splicehole_test.go: every page its own, for CHANNEL_START
		return "populate", err
	}
	if _, err := strangerCall(sp.sock, &uapi.ChannelStart{Channel: co.Channel}); err != nil {
		return "CHANNEL_START", err
	}
	sp.chans = append(sp.chans, spinChannel{id: co.Channel, user: user, status: status, mask: uint64(co.RingSize) - 1, head: word(user, abi.RegDoorbell).Load()})
	return "", nil
}

// closeChannel closes the spinner's i-th channel (CHANNEL_CLOSE) and
// unmaps it.
func (sp *spinner) closeChannel(i int) error {
	ch := sp.chans[i]
	sp.chans = append(sp.chans[:i], sp.chans[i+1:]...)
	unix.Munmap(ch.user)
	unix.Munmap(ch.status)
	_, err := strangerCall(sp.sock, &uapi.ChannelClose{Channel: ch.id})
	return err
}

// spin writes a SPIN of 2^62 cycles into each channel's next slot, rings
// each doorbell, and kicks the daemon, which wakes a sleeping engine.
func (sp *spinner) spin() { sp.spinFor(1 << 62) }

// spinFor is spin with SPINs of cycles cycles (nanoseconds).
func (sp *spinner) spinFor(cycles uint64) {
	for _, ch := range sp.chans {
		cmd := abi.Command{Op: abi.OpSpin, Ctx: sp.ctx, Value: cycles, Seq: ch.head}
		cmd.Encode(ch.user[uapi.UserRingOffset+abi.SlotOffset(ch.head, ch.mask):][:abi.CommandSize])
		word(ch.user, abi.RegDoorbell).Store(ch.head + 1)
	}
	sp.kickDaemon()
}

// kickDaemon writes the kick eventfd: the daemon wakes the engines of
// the client's channels.
func (sp *spinner) kickDaemon() {
	one := [8]byte{1}
	unix.Write(sp.kick, one[:])
}

// ended returns each SPIN's status once all have completed, and
// whether they have.
func (sp *spinner) ended() ([]abi.Status, bool) {
	var sts []abi.Status
	for _, ch := range sp.chans {
		w := uapi.StatusCompletionsOffset + 8*abi.CompletionWord(ch.head, ch.mask)
		if !abi.Completed(word(ch.status, w+8*uapi.CompletionIndexWord).Load(), ch.head) {
			return nil, false
		}
		sts = append(sts, abi.Status(word(ch.status, w+8*uapi.CompletionStatusWord).Load()))
	}
	return sts, true
}

// alive reports whether the daemon still answers the connection.
func (sp *spinner) alive() bool {
	_, err := strangerCall(sp.sock, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})
	return err == nil
}

func (sp *spinner) close() {
	for _, ch := range sp.chans {
		unix.Munmap(ch.user)
		unix.Munmap(ch.status)
	}
	unix.Close(sp.kick)
	sp.sock.Close()
}

// spinsRole: with arg 0, round after round on a fresh connection and
// context; with arg n > 0, first n connections each with its context
// and channels, made before any SPIN runs, used one a round, then fresh
// ones. A round rings a SPIN on each engine and waits until both have
// ended (the watchdog: about 4 s), or the connection is dropped. It
// prints "ready" once the first round is spinning, "round over" after
// each round, "refused: CALL errno=N" (once for a run of the same
// refusal) when it cannot start one, and "done" after the test's line.
func spinsRole(node, arg string) error {
	prepared, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	var stop atomic.Bool
	go func() {
		waitLine()
		stop.Store(true)
	}()
	var spinners []*spinner
	for range prepared {
		sp, call, err := dialSpinner(node)
		if err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
		spinners = append(spinners, sp)
	}
	refused := ""
	refuse := func(line string) {
		if line != refused {
			fmt.Println("refused: " + line)
			refused = line
		}
		time.Sleep(50 * time.Millisecond)
	}
	for rounds := 0; !stop.Load(); {
		var sp *spinner
		if len(spinners) > 0 {
			sp, spinners = spinners[0], spinners[1:]
			if !sp.alive() {
				sp.close()
				refuse("a prepared connection dropped")
				continue
			}
		} else {
			var call string
			if sp, call, err = dialSpinner(node); err != nil {
				refuse(errnoLine(call, err))
				continue
			}
		}
		refused = ""
		sp.spin()
		if rounds++; rounds == 1 {
			fmt.Println("ready")
		}
		for i, end := 0, time.Now().Add(patience); time.Now().Before(end) && !stop.Load(); i++ {
			if sts, ok := sp.ended(); ok {
				fmt.Printf("round %d: SPINs ended %v\n", rounds, sts)
				break
			}
			if i%10 == 9 && !sp.alive() {
				fmt.Printf("round %d: its connection dropped\n", rounds)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sp.close()
		fmt.Println("round over")
	}
	for _, sp := range spinners {
		sp.close()
	}
	fmt.Println("done")
	return nil
}

// roundsIn counts the rounds a spins stranger reported in lines.
func roundsIn(lines []string) int {
	n := 0
	for _, line := range lines {
		if line == "round over" {
			n++
		}
	}
	return n
}

// refusedBusyIn reports whether a stranger said in lines that a call was
// refused with ErrBusy: its uid barred.
func refusedBusyIn(lines []string) bool {
	busy := fmt.Sprintf("errno=%d", uint32(uapi.ErrBusy))
	for _, line := range lines {
		if strings.HasPrefix(line, "refused: ") && strings.HasSuffix(line, busy) {
			return true
		}
	}
	return false
}

// secondRound is how long the tests watch after the first round: longer
// than a round holds the engines (the watchdog's limit twice, 4 s), so
// that a second round would be seen by a probe.
const secondRound = 6 * time.Second

// testSpinsBarred runs the spins stranger with arg and requires what the
// tests below say.
func testSpinsBarred(t *testing.T, arg string) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	d := startDaemon(t) // softgpud's defaults, its 2 s watchdog among them
	s := startStranger(t, "spins", d.node, arg, cred)
	s.until(t, "ready")
	first := s.until(t, "round over") // about 4 s: the watchdog's design, which no bar can shorten
	t.Logf("the first round: %q", first)
	probes := 0
	for start := time.Now(); time.Since(start) < secondRound; probes++ {
		d.live(t, fmt.Sprintf("probe %d, %v after the stranger's first round of SPINs", probes, time.Since(start).Round(time.Millisecond)))
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("%d probes; then the stranger said %q", probes, lines)
	assert.Zero(t, roundsIn(lines), "rounds of SPINs the stranger ran after its first; want none, its uid barred")
	assert.True(t, refusedBusyIn(lines), "the stranger was not refused with ErrBusy after its SPINs hung the engines: %q", lines)
	d.live(t, "after the stranger")
	d.stop(t)
}

// TestAStrangerCannotHoldBothEnginesWithSpins: after the watchdog has
// reset the engines under a stranger's SPINs once, the stranger's uid
// may not make a context for a while (ATTACH: ErrBusy), so it cannot
// start another round on a fresh one.
func TestAStrangerCannotHoldBothEnginesWithSpins(t *testing.T) {
	testSpinsBarred(t, "0")
}

// TestAStrangerCannotHoldBothEnginesWithPreparedContexts: a stranger
// that made its contexts and channels before its first SPIN does not
// need ATTACH for the next round. A reset under a SPIN of its uid bans
// every context of the uid and hangs up every connection of it, so the
// contexts it prepared are gone too; and its fresh ones are refused.
func TestAStrangerCannotHoldBothEnginesWithPreparedContexts(t *testing.T) {
	testSpinsBarred(t, "4")
}

// innocentRole: a client of another uid that keeps 2 s of DELAYs (20 of
// 100 ms, each well inside the watchdog) queued on each engine, says
// "ready", and at the test's line waits for them and dials again.
func innocentRole(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	var pending []interface{ Wait() error }
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := g.NewBatch(e)
		for range 20 {
			b.Delay(100_000_000)
		}
		p, err := b.Submit()
		if err != nil {
			return err
		}
		pending = append(pending, p)
	}
	fmt.Println("ready")
	if err := waitLine(); err != nil {
		return err
	}
	for i, p := range pending {
		fmt.Println(errnoLine(fmt.Sprintf("DELAYs %d", i), p.Wait()))
	}
	g.Close()
	again, err := client.Dial(node)
	fmt.Println(errnoLine("Dial", err))
	if err == nil {
		again.Close()
	}
	fmt.Println("done")
	return nil
}

// TestAnInnocentOnAResetEngineIsNotBarred: a client of another uid whose
// DELAYs share both engines with a stranger's SPINs — queued behind them,
// or preempted by them and resumed after the reset — is not struck: its
// DELAYs complete, and it may dial again while the stranger's uid is
// barred.
func TestAnInnocentOnAResetEngineIsNotBarred(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the strangers must be of other uids, and only root can make them so")
	}
	d := startDaemon(t)
	innocent := startStranger(t, "innocent", d.node, "", &syscall.Credential{Uid: strangerUID - 1, Gid: strangerUID - 1})
	innocent.until(t, "ready")
	s := startStranger(t, "spins", d.node, "0", cred)
	s.until(t, "ready")
	first := s.until(t, "round over")
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("the stranger: %q, then %q", first, lines)
	fmt.Fprintln(innocent.stdin)
	assert.Equal(t, []string{"DELAYs 0 ok", "DELAYs 1 ok", "Dial ok"}, innocent.findings(t), "what the innocent client of uid %d found", strangerUID-1)
	d.live(t, "after the strangers")
	d.stop(t)
}
