package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// openRing is openTest with a device configuration of the test's choosing
// (1 MiB of memory unless it says otherwise).
func openRing(t testing.TB, cfg device.Config) *Driver {
	t.Helper()
	return openWith(t, cfg, Config{})
}

func fill(dst, size uint64, v byte) abi.Command {
	return abi.Command{Op: abi.OpFill, Dst: dst, Size: size, Value: uint64(v)}
}

// TestOrderIsPreserved submits one batch, longer than the ring, in which
// every second command copies what the command before it filled: if the
// engine ran any two out of order, a copy would carry the wrong byte.
func TestOrderIsPreserved(t *testing.T) {
	d := openRing(t, device.Config{RingSize: 16})
	const pairs, scratch, out = 100, AllocBase, AllocBase + 4096
	var cmds []abi.Command
	for k := range pairs {
		cmds = append(cmds, fill(scratch, 64, byte(k)))
		cmds = append(cmds, abi.Command{Op: abi.OpCopy, Src: scratch, Dst: out + 64*uint64(k), Size: 64})
	}
	p, err := d.SubmitBatch(abi.EngineCopy, cmds)
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	got := make([]byte, 64*pairs)
	d.CopyFromDevice(got, out)
	for k := range pairs {
		require.Equal(t, bytes.Repeat([]byte{byte(k)}, 64), got[64*k:64*k+64], "copy %d found %#x...; want %#x: the engine ran commands out of order", k, got[64*k], byte(k))
	}
}

// TestManyInFlight submits hundreds of single fills without waiting, on both
// engines, each to its own region, then waits for all of them and checks
// every byte.
func TestManyInFlight(t *testing.T) {
	d := openRing(t, device.Config{RingSize: 64})
	const n, region = 500, 128
	before := d.Doorbells()
	var pending []*Pending
	for i := range n {
		p, err := d.SubmitBatch(abi.Engine(i%abi.NumEngines), []abi.Command{fill(AllocBase+region*uint64(i), region, byte(i*7))})
		require.NoError(t, err, "submission %d", i)
		pending = append(pending, p)
	}
	// Two goroutines wait on every Pending at once: Wait is safe to share.
	var wg sync.WaitGroup
	errs := make([][]error, 2)
	for w := range 2 {
		wg.Go(func() {
			for _, p := range pending {
				errs[w] = append(errs[w], p.Wait())
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[0][i] != nil || errs[1][i] != nil {
			t.Fatalf("fill %d: Wait = %v, %v; want nil", i, errs[0][i], errs[1][i])
		}
	}
	// Counted before the read below, which may itself be a command on
	// the copy engine, with a doorbell of its own.
	assert.Equal(t, uint64(n), d.Doorbells()-before, "doorbells for %d single submissions", n)
	got := make([]byte, n*region)
	d.CopyFromDevice(got, AllocBase)
	for i := range n {
		if want := bytes.Repeat([]byte{byte(i * 7)}, region); !bytes.Equal(got[region*i:region*(i+1)], want) {
			t.Fatalf("region %d holds %#x...; want %#x", i, got[region*i], want[0])
		}
	}
}

// TestDoorbellsPerBatch: a batch that fits rings the doorbell once; one
// larger than the free room rings once per run that fits.
func TestDoorbellsPerBatch(t *testing.T) {
	tests := []struct {
		ring, batch uint64
		minBells    uint64
		maxBells    uint64
	}{
		{ring: 256, batch: 1, minBells: 1, maxBells: 1},
		{ring: 256, batch: 200, minBells: 1, maxBells: 1},
		{ring: 256, batch: 256, minBells: 1, maxBells: 1},
		{ring: 4, batch: 10, minBells: 3, maxBells: 10}, // ⌈10/4⌉ at least; at most one per command
		{ring: 1, batch: 5, minBells: 5, maxBells: 5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("ring=%d/batch=%d", tt.ring, tt.batch), func(t *testing.T) {
			d := openRing(t, device.Config{RingSize: tt.ring})
			cmds := make([]abi.Command, tt.batch)
			for i := range cmds {
				cmds[i] = fill(AllocBase+64*uint64(i), 64, byte(i+1))
			}
			p, err := d.SubmitBatch(abi.EngineCopy, cmds)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			if got := d.Doorbells(); got < tt.minBells || got > tt.maxBells {
				t.Errorf("SubmitBatch(%d commands) on a ring of %d rang %d doorbells; want %d to %d", tt.batch, tt.ring, got, tt.minBells, tt.maxBells)
			}
			got := make([]byte, 64*tt.batch)
			d.CopyFromDevice(got, AllocBase)
			for i := range tt.batch {
				assert.Equal(t, byte(i+1), got[64*i], "fill %d did not run", i)
			}
		})
	}
}

// TestFullRingBlocksAndResumes has more submitters, each with several
// batches outstanding, than a ring of four slots can hold. Each command adds
// one to its submitter's counter, so a command lost, run twice, or
// overwritten in its slot before it ran shows in the final counts.
func TestFullRingBlocksAndResumes(t *testing.T) {
	const submitters, outstanding = 8, 3
	perSubmitter := 500
	if testing.Short() {
		perSubmitter = 100
	}
	d := openRing(t, device.Config{RingSize: 4})
	counters := uint64(AllocBase) // submitter w's uint32 counter is at counters+4w
	var wg sync.WaitGroup
	errs := make(chan error, submitters)
	for w := range uint64(submitters) {
		wg.Go(func() {
			add := abi.Command{Op: abi.OpAdd32, Dst: counters + 4*w, Size: 4, Value: 1}
			var queue []*Pending
			for sent := 0; sent < perSubmitter; {
				batch := []abi.Command{add}
				if sent%5 == 3 { // now and then a batch of two: two adds, one doorbell
					batch = append(batch, add)
				}
				p, err := d.SubmitBatch(abi.EngineCompute, batch)
				if err != nil {
					errs <- fmt.Errorf("submitter %d, command %d: %w", w, sent, err)
					return
				}
				sent += len(batch)
				queue = append(queue, p)
				if len(queue) == outstanding {
					if err := queue[0].Wait(); err != nil {
						errs <- fmt.Errorf("submitter %d: %w", w, err)
						return
					}
					queue = queue[1:]
				}
			}
			for _, p := range queue {
				if err := p.Wait(); err != nil {
					errs <- fmt.Errorf("submitter %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := make([]byte, 4*submitters)
	d.CopyFromDevice(got, counters)
	for w := range submitters {
		assert.Equal(t, uint32(perSubmitter), binary.LittleEndian.Uint32(got[4*w:]), "submitter %d's counter; want %d", w, perSubmitter)
	}
}

// TestStatusIsNotOverwrittenBeforeItIsRead submits a bad command and does
// not wait for it, then pushes many good commands through a ring of two
// slots, also without waiting, so the bad command's slot and status entry
// are reused many times before anyone asks — only the submitters' reaping
// frees slots. Its Wait must still report its own status, not that of a
// later command that ran in the same slot.
func TestStatusIsNotOverwrittenBeforeItIsRead(t *testing.T) {
	d := openRing(t, device.Config{RingSize: 2})
	bad, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{fill(1<<20, 1, 0)}) // one past the end
	require.NoError(t, err)
	var good []*Pending
	for i := range 20 {
		p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{fill(AllocBase, 64, byte(i))})
		require.NoError(t, err, "good fill %d", i)
		good = append(good, p)
	}
	assert.ErrorIs(t, bad.Wait(), abi.StatusOutOfRange, "Wait for the bad fill after its slot was reused")
	for i, p := range good {
		assert.NoError(t, p.Wait(), "good fill %d: Wait", i)
	}
}

// TestBadCommandInABatchFailsOnlyItself puts two bad commands among good
// ones: Wait names both, Err tells each command's fate, and the good ones
// on either side of them ran.
func TestBadCommandInABatchFailsOnlyItself(t *testing.T) {
	d := openRing(t, device.Config{})
	const a, b = AllocBase, AllocBase + 256
	cmds := []abi.Command{
		fill(a, 64, 0x11),
		fill(1<<20-8, 16, 0x22), // runs off the end of memory
		{Op: abi.OpCopy, Src: a, Dst: b, Size: 64},
		{Op: abi.OpAdd32, Dst: a, Size: 64, Value: 1}, // a kernel, on the copy engine
		fill(a, 8, 0x33),
	}
	p, err := d.SubmitBatch(abi.EngineCopy, cmds)
	require.NoError(t, err)
	err = p.Wait()
	for _, want := range []error{abi.StatusOutOfRange, abi.StatusWrongEngine} {
		assert.ErrorIs(t, err, want, "Wait; want it to wrap %v", want)
	}
	if errors.Is(err, abi.StatusMisaligned) || errors.Is(err, ErrClosed) {
		t.Errorf("Wait = %v; wraps an error no command had", err)
	}
	for _, s := range []string{"command 1 of 5", "command 3 of 5"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Wait = %v; want it to name %q", err, s)
		}
	}
	wantErr := []error{nil, abi.StatusOutOfRange, nil, abi.StatusWrongEngine, nil}
	for i, want := range wantErr {
		got := p.Err(i)
		if (want == nil) != (got == nil) || (want != nil && !errors.Is(got, want)) {
			t.Errorf("Err(%d) (%v) = %v; want %v", i, cmds[i].Op, got, want)
		}
	}
	var ce *CommandError
	if !errors.As(p.Err(1), &ce) || ce.Op != abi.OpFill || ce.Engine != abi.EngineCopy {
		t.Errorf("Err(1) = %#v; want a *CommandError for FILL on the copy engine", p.Err(1))
	}
	got := make([]byte, 256+64)
	d.CopyFromDevice(got, a)
	want := append(append(bytes.Repeat([]byte{0x33}, 8), bytes.Repeat([]byte{0x11}, 56)...), make([]byte, 192)...)
	want = append(want, bytes.Repeat([]byte{0x11}, 64)...)
	assert.Equal(t, want, got, "memory after the batch differs from the good commands' effects")
	if end := make([]byte, 8); d.CopyFromDevice(end, 1<<20-8) == nil && !bytes.Equal(end, make([]byte, 8)) {
		t.Errorf("the refused fill wrote the last bytes of memory: % x", end)
	}
}

// TestCloseWithManyInFlight closes the device while a long DELAY holds the
// compute engine, commands are queued behind it, and more submitters are
// blocked on the full ring. Every waiter and every submitter must return —
// with ErrClosed, the DELAY's StatusAborted, or nil — and leakcheck proves
// no goroutine of ours outlives the test.
func TestCloseWithManyInFlight(t *testing.T) {
	d := openRing(t, device.Config{RingSize: 8})
	delay, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
	require.NoError(t, err)
	const submitters = 10
	results := make(chan error, submitters+1)
	go func() { results <- delay.Wait() }()
	for w := range uint64(submitters) {
		go func() {
			cmds := []abi.Command{fill(AllocBase+64*w, 64, 1), fill(AllocBase+64*w, 64, 2), fill(AllocBase+64*w, 64, 3)}
			p, err := d.SubmitBatch(abi.EngineCompute, cmds) // 7 free slots: most block here
			if err != nil {
				results <- err
				return
			}
			results <- p.Wait()
		}()
	}
	time.Sleep(20 * time.Millisecond) // let them queue and block; the checks hold however far they got
	require.NoError(t, d.Close())
	deadline := time.After(10 * time.Second)
	for i := range submitters + 1 {
		select {
		case err := <-results:
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, abi.StatusAborted) {
				t.Errorf("a call cut short by Close = %v; want nil, ErrClosed or StatusAborted", err)
			}
		case <-deadline:
			t.Fatalf("%d of %d calls still waiting 10 s after Close", submitters+1-i, submitters+1)
		}
	}
}

func TestEmptyBatch(t *testing.T) {
	d := openRing(t, device.Config{})
	p, err := d.SubmitBatch(abi.EngineCopy, nil)
	if err != nil || p.Wait() != nil || p.Len() != 0 || d.Doorbells() != 0 {
		t.Errorf("empty batch: err %v, Wait %v, Len %d, doorbells %d; want nil, nil, 0, 0", err, p.Wait(), p.Len(), d.Doorbells())
	}
	d.Close()
	_, err = d.SubmitBatch(abi.EngineCopy, nil)
	assert.ErrorIs(t, err, ErrClosed, "empty batch after Close")
}

// TestErrOutsideTheBatch: Pending.Err with an index the batch does not have
// is an error, not a panic.
func TestErrOutsideTheBatch(t *testing.T) {
	d := openTest(t)
	p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpNop}})
	require.NoError(t, err)
	p.Wait()
	for _, i := range []int{-1, 1, 5} {
		assert.Error(t, p.Err(i), "Err(%d) on a batch of one", i)
	}
}
