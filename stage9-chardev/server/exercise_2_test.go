//go:build exercise

package server_test

// The checker of exercise 9.2, "A quota on time" (book/stage9-chardev.md):
//
//	go test -tags exercise -run Exercise9_2 ./server
//
// Two uids share the compute engine of a real softgpud: a stranger (uid
// nobody) keeps DELAYs queued on four channels, two in one client and one
// in each of two more (hogClients), and a client of the test's own uid
// does the same on one channel. On the untouched stage the engine shares
// its time among channels, so the stranger takes about four fifths of
// it; shared among clients, it would take three quarters. The checker
// passes once each uid gets an even share, however many channels and
// clients it opens: between a third and two thirds, to leave room for
// the count's edges (leastShare).
//
// The time each uid received is read off the device's clock, not the
// test's: a DELAY of delayCycles completes after that many cycles of its
// own time on the engine (its cursor counts the cycles it ran and not the
// ones it spent preempted, device/execute.go), so a uid's completed
// DELAYs, times delayCycles, are the engine time it got. The window is a
// number of completed DELAYs, not a duration, so a loaded machine makes
// the test take longer but does not move the shares: time the engine
// goroutine loses to the host counts, on the device's clock, for the
// channel it was serving, wherever the host happened to stop it.
//
// A second uid needs root: the test starts its stranger as nobody, as
// 9.1's checker does, and fails, saying so, when it cannot.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
)

const (
	// hogClients is the stranger's clients, as the busy channels each
	// opens: four channels, three clients. The untouched stage gives the
	// test's uid 1/5 of the engine; a share per client would give it 1/4.
	hogClients  = "2,1,1"
	hogChannels = 4 // their sum
	// delayCycles is each DELAY's length: 1 ms of engine time.
	delayCycles = 1_000_000
	// windowDelays is how many DELAYs, both uids together, the shares are
	// counted over: 600 ms of engine time.
	windowDelays = 600
	// leastShare is the least of the engine either uid may get. The
	// count is off by at most the DELAYs part run at each end of the
	// window (one per busy channel: 10 of 600) and by the pipe round
	// trip that reads the stranger's count (a DELAY or two), and a
	// scheduler's turns overshoot by a boundary each; a band from a
	// third to two thirds is several times all that, and the untouched
	// stage's one fifth lies well outside it.
	leastShare = 1.0 / 3
)

func init() {
	strangerRoles["exercise-9.2"] = hogEngine
}

func TestExercise9_2(t *testing.T) {
	cred, uid := strangerCred()
	if cred == nil {
		t.Fatalf("this checker needs root: a share per uid needs a second uid, and it starts one as nobody (uid %d); run it as root (in a container, say)", strangerUID)
	}
	d := startDaemon(t)
	hog := startStranger(t, "exercise-9.2", d.node, hogClients, cred)
	if got := hog.until(t, "running"); len(got) != 0 {
		t.Fatalf("the stranger said %q before it was running", got)
	}

	g, err := client.Dial(d.node)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ch, err := g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityNormal})
	if err != nil {
		t.Fatal(err)
	}
	var mine atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() { stopped <- keepDelaying(ch, &mine, stop) }()
	// counts returns both uids' completed DELAYs as of one moment: the
	// test's is read on each side of the question to the stranger and
	// taken halfway.
	counts := func() (own, theirs uint64) {
		before := mine.Load()
		theirs = hogCount(t, hog)
		return (before + mine.Load()) / 2, theirs
	}

	waitFor(t, "the test's channel completing its first DELAY", func() (bool, string) {
		return mine.Load() > 0, fmt.Sprintf("%d DELAYs done", mine.Load())
	})
	own0, theirs0 := counts()
	var own, theirs uint64
	// The window closes after windowDelays of engine time, whatever the
	// host's clock says; the deadline is for an engine that stopped.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		own, theirs = counts()
		own, theirs = own-own0, theirs-theirs0
		if own+theirs >= windowDelays {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in a minute the engine completed %d DELAYs of the test's and %d of the stranger's, of %d; it has stopped", own, theirs, windowDelays)
		}
	}
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatalf("the test's DELAY: %v", err)
	}

	share := float64(own) / float64(own+theirs)
	t.Logf("over %d DELAYs of %d µs on the compute engine: uid %d (1 channel) %d, %.0f%%; uid %d (%d channels in clients of %s) %d, %.0f%%",
		own+theirs, delayCycles/1000, os.Getuid(), own, 100*share, uid, hogChannels, hogClients, theirs, 100*(1-share))
	if share < leastShare || 1-share < leastShare {
		t.Errorf("the compute engine's time, counted in completed DELAYs of %d µs: uid %d with 1 busy channel got %.0f%% (%d), uid %d with %d in clients of %s got %.0f%% (%d); want each uid a third to two thirds of it: a share per uid, however many channels and clients it opens (an engine that shares by channel gives 1 of 5 to one channel, by client 1 of 4)",
			delayCycles/1000, os.Getuid(), 100*share, own, uid, hogChannels, hogClients, 100*(1-share), theirs)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("closing the test's channel: %v", err)
	}
	hog.stdin.Close() // the stranger's cue to go
	d.live(t, "after the shared engine")
	d.stop(t)
}

// hogCount asks the stranger how many DELAYs its channels have completed.
func hogCount(t *testing.T, s *stranger) uint64 {
	t.Helper()
	if _, err := fmt.Fprintln(s.stdin); err != nil {
		t.Fatalf("asking the stranger for its count: %v", err)
	}
	select {
	case line, ok := <-s.lines:
		var n uint64
		if _, err := fmt.Sscanf(line, "count %d", &n); !ok || err != nil {
			t.Fatalf("the stranger answered %q (open %v); want \"count N\": %s", line, ok, s.stderr.String())
		}
		return n
	case <-time.After(patience):
		t.Fatalf("the stranger did not give its count within %v", patience)
	}
	return 0
}

// hogEngine dials one client for each number in arg ("2,1,1"), opens that
// many channels on the compute engine in it, and keeps each busy with
// DELAYs (keepDelaying). It says "running" once they have completed one
// each on average, then answers each line on stdin with "count N", the
// DELAYs completed so far, until stdin closes.
func hogEngine(node, arg string) error {
	var done atomic.Uint64
	failed := make(chan error, hogChannels)
	channels := 0
	for _, field := range strings.Split(arg, ",") {
		n, err := strconv.Atoi(field)
		if err != nil {
			return err
		}
		g, err := client.Dial(node)
		if err != nil {
			return err
		}
		defer g.Close()
		for range n {
			ch, err := g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityNormal})
			if err != nil {
				return err
			}
			channels++
			go func() { failed <- keepDelaying(ch, &done, nil) }()
		}
	}
	for done.Load() < uint64(channels) {
		select {
		case err := <-failed:
			return err
		case <-time.After(time.Millisecond):
		}
	}
	fmt.Println("running")
	for sc := bufio.NewScanner(os.Stdin); sc.Scan(); {
		fmt.Printf("count %d\n", done.Load())
	}
	return nil
}

// keepDelaying keeps two DELAYs of delayCycles queued on ch, so that the
// channel has work every moment it could run (a channel whose ring is
// empty gives up the engine), and counts each that completes in done,
// until stop is closed or a DELAY fails.
func keepDelaying(ch *softgpu.Channel, done *atomic.Uint64, stop <-chan struct{}) error {
	var queued []*softgpu.Pending
	for {
		for len(queued) < 2 {
			b := ch.NewBatch()
			b.Delay(delayCycles)
			p, err := b.Submit()
			if err != nil {
				return err
			}
			queued = append(queued, p)
		}
		if err := queued[0].Wait(); err != nil {
			return err
		}
		queued = queued[1:]
		done.Add(1)
		select {
		case <-stop:
			return nil
		default:
		}
	}
}
