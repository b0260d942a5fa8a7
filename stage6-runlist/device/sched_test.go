package device

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
)

// The scheduler's tests play the driver's part of runlists by hand: the
// tables, state blocks and context save areas live in the last 80 KiB of a
// test device's table area, which no context maps and the page tables of
// vm_helpers_test.go never reach.

// schedBase returns the PA of the scheduler tests' area.
func schedBase(d *Device) uint64 { return uint64(len(d.mem)) - 80<<10 }

// stateFor returns the PA of channel c's state block in that area.
func stateFor(d *Device, c abi.Channel) uint64 {
	return schedBase(d) + 4096 + uint64(c)*abi.ChannelStateSize
}

// ctxFor returns the PA of channel c's context save area in that area, for
// a device of testContextSize.
func ctxFor(d *Device, c abi.Channel) uint64 {
	return schedBase(d) + 16<<10 + uint64(c)*testContextSize
}

// submitRunlist hands engine e a runlist of entries and waits for its
// acknowledgement; it returns the engine's verdict.
func submitRunlist(t testing.TB, d *Device, e abi.Engine, entries []abi.RunlistEntry) abi.RunlistError {
	t.Helper()
	table := schedBase(d) + uint64(e)*2048
	for i, ent := range entries {
		ent.Encode(d.mem[table+uint64(i)*abi.RunlistEntrySize:])
	}
	return submitTable(t, d, e, table, uint64(len(entries)))
}

// submitTable submits the table at base, n entries long, as it is.
func submitTable(t testing.TB, d *Device, e abi.Engine, base, n uint64) abi.RunlistError {
	t.Helper()
	control, status := abi.EngineControlPage(e), abi.EngineStatusPage(e)
	d.regs.Store(control+abi.RegRunlistBase, base)
	d.regs.Store(control+abi.RegRunlistLen, n)
	gen := d.regs.Load(status+abi.RegRunlistAck) + 1
	d.regs.Store(control+abi.RegRunlistGen, gen)
	d.WakeEngine(e)
	deadline := time.Now().Add(10 * time.Second)
	for d.regs.Load(status+abi.RegRunlistAck) != gen {
		if time.Now().After(deadline) {
			t.Fatalf("runlist %d not acknowledged by %v in 10 s", gen, e)
		}
		runtime.Gosched()
	}
	return abi.RunlistError(d.regs.Load(status + abi.RegRunlistError))
}

// rlEntry is a runlist entry for channel c in context 0 with a state block.
func rlEntry(d *Device, c abi.Channel, prio uint8, slice uint64) abi.RunlistEntry {
	clear(d.mem[stateFor(d, c) : stateFor(d, c)+abi.ChannelStateSize])
	return abi.RunlistEntry{Channel: c, Priority: prio, Flags: abi.RunlistPrivileged, Timeslice: slice, State: stateFor(d, c),
		CtxSave: ctxFor(d, c)}
}

// publish places cmds in channel c's ring after what is there and rings
// its doorbell once; it returns the index of the first. The ring must have
// room for them.
func publish(d *Device, c abi.Channel, cmds ...abi.Command) uint64 {
	first := place(d, c, cmds...)
	ringDoorbell(d, c, first+uint64(len(cmds)))
	return first
}

// place writes cmds into channel c's ring after what is there, without
// ringing the doorbell, and returns the index of the first.
func place(d *Device, c abi.Channel, cmds ...abi.Command) uint64 {
	first := d.regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell)
	for k, cmd := range cmds {
		i := first + uint64(k)
		cmd.Seq = i
		cmd.Encode(slot(d, c, i))
	}
	return first
}

// await waits for the completion of index i on channel c and returns its
// status.
func await(t testing.TB, d *Device, c abi.Channel, i uint64) abi.Status {
	t.Helper()
	waitCompleted(t, d, c, i)
	return statusOf(d, c, i)
}

// counter reads an engine status register.
func counter(d *Device, e abi.Engine, reg uint64) uint64 {
	return d.regs.Load(abi.EngineStatusPage(e) + reg)
}

// TestRunlistChecks: every malformed runlist is refused with the error and
// entry that say why, and the engine keeps serving the list it had.
func TestRunlistChecks(t *testing.T) {
	d := openTest(t, Config{})
	const e = abi.EngineCopy
	def := abi.DefaultChannel(e)
	good := func() abi.RunlistEntry { return rlEntry(d, def, abi.PriorityNormal, 0) }
	with := func(f func(*abi.RunlistEntry)) []abi.RunlistEntry {
		ent := good()
		f(&ent)
		return []abi.RunlistEntry{good(), ent}
	}
	tests := []struct {
		name    string
		entries []abi.RunlistEntry
		want    abi.RunlistError
	}{
		{"no such channel", with(func(x *abi.RunlistEntry) { x.Channel = abi.NumChannels }), abi.RunlistBadEntry | 1<<8},
		{"priority too high", with(func(x *abi.RunlistEntry) { x.Channel, x.Priority = 5, abi.MaxPriority+1 }), abi.RunlistBadEntry | 1<<8},
		{"no such context", with(func(x *abi.RunlistEntry) { x.Channel, x.Context = 5, abi.MaxContexts }), abi.RunlistBadEntry | 1<<8},
		{"undefined flag", with(func(x *abi.RunlistEntry) { x.Channel, x.Flags = 5, 0x80 }), abi.RunlistBadEntry | 1<<8},
		{"state block misaligned", with(func(x *abi.RunlistEntry) { x.Channel, x.State = 5, 8 }), abi.RunlistBadEntry | 1<<8},
		{"state block past memory", with(func(x *abi.RunlistEntry) { x.Channel, x.State = 5, uint64(len(d.mem))-64 }), abi.RunlistBadEntry | 1<<8},
		{"channel twice", with(func(*abi.RunlistEntry) {}), abi.RunlistDuplicate | 1<<8},
		{"another engine's channel", with(func(x *abi.RunlistEntry) { x.Channel = abi.DefaultChannel(abi.EngineCompute) }), abi.RunlistBusy | 1<<8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := submitRunlist(t, d, e, tt.entries); got != tt.want {
				t.Fatalf("runlist refused with %v; want %v", got, tt.want)
			}
			require.Equal(t, abi.StatusOK, run(t, d, e, abi.Command{Op: abi.OpFill, Dst: 0, Size: 8, Value: 1}), "the default channel after a refused runlist")
		})
	}
	for _, tt := range []struct {
		name    string
		base, n uint64
	}{
		{"empty", schedBase(d), 0},
		{"too long", schedBase(d), abi.MaxRunlist + 1},
		{"misaligned", schedBase(d) + 8, 1},
		{"past memory", uint64(len(d.mem)) - abi.RunlistEntrySize, 2},
		{"base wraps", 1<<64 - abi.RunlistEntrySize, 2},
	} {
		assert.Equal(t, abi.RunlistBadTable, submitTable(t, d, e, tt.base, tt.n), "table %s", tt.name)
	}
	// A refused list claimed nothing: channel 5 can go on the other engine.
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, abi.EngineCompute, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(abi.EngineCompute), 1, 0), rlEntry(d, 5, 1, 0)}), "channel 5 on the compute engine after the copy engine's refusals")
}

// TestAChannelRunsInItsContext: an entry without RunlistPrivileged binds
// its channel to the entry's context; a command naming another fails with
// StatusBadContext and touches nothing, one naming its own runs.
func TestAChannelRunsInItsContext(t *testing.T) {
	d := openTest(t, Config{})
	const e, c = abi.EngineCopy, abi.Channel(7)
	ent := rlEntry(d, c, abi.PriorityNormal, 0)
	ent.Flags, ent.Context = 0, testCtx
	tb, root := userTables(t, d)
	const va = uint64(1) << 40
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), ent}), "runlist")
	mem := data(d)
	pattern(mem)
	want := bytes.Clone(mem)
	i := publish(d, c, abi.Command{Op: abi.OpFill, Ctx: 0, Dst: 0x10000, Size: 64, Value: 9})
	if st := await(t, d, c, i); st != abi.StatusBadContext || !bytes.Equal(mem, want) {
		t.Fatalf("a command naming context 0 on a channel of context %d: %v (memory changed: %v); want %v",
			testCtx, st, !bytes.Equal(mem, want), abi.StatusBadContext)
	}
	i = publish(d, c, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 64, Value: 9})
	if st := await(t, d, c, i); st != abi.StatusOK || mem[0x10000] != 9 {
		t.Fatalf("a command in the channel's own context: %v, byte %d", st, mem[0x10000])
	}
}

// preemptCase is a command to run under preemption, with its expected
// effect computed by running it unpreempted on a fresh device.
type preemptCase struct {
	name string
	cmd  abi.Command
}

// preemptCases covers every command that moves data in runs, each long
// enough to cross many chunk boundaries: fills and copies (up and down),
// and the two kernels, which carry state (SUM32's running total) across a
// preemption.
func preemptCases() []preemptCase {
	const n = 1<<20 + 4096 + 12 // 17 chunks and a bit, a multiple of 4
	return []preemptCase{
		{"fill", abi.Command{Op: abi.OpFill, Dst: 0x1000, Size: n, Value: 0x5a}},
		{"copy", abi.Command{Op: abi.OpCopy, Src: 0x1000, Dst: 0x180000, Size: n}},
		{"copy down", abi.Command{Op: abi.OpCopy, Src: 0x1000, Dst: 0x1000 + 0x9000, Size: n}},
		{"sum32", abi.Command{Op: abi.OpSum32, Src: 0x1000, Dst: 0x3f0000, Size: n}},
		{"add32", abi.Command{Op: abi.OpAdd32, Dst: 0x1000, Size: n, Value: 0x01020304}},
	}
}

// engineFor returns the engine that runs op.
func engineFor(op abi.Opcode) abi.Engine {
	if op == abi.OpSum32 || op == abi.OpAdd32 {
		return abi.EngineCompute
	}
	return abi.EngineCopy
}

// TestPreemptedCommandsResumeExactly: a command preempted at every chunk
// boundary, or at random ones, and resumed from its state block, leaves
// memory byte for byte as the same command run without preemption — and
// it was preempted exactly as often as asked.
func TestPreemptedCommandsResumeExactly(t *testing.T) {
	const memSize = 4 << 20
	for _, tc := range preemptCases() {
		e := engineFor(tc.cmd.Op)
		ref := openVM(t, Config{MemorySize: memSize})
		pattern(data(ref))
		require.Equal(t, abi.StatusOK, run(t, ref, e, tc.cmd), "%s unpreempted", tc.name)
		want := bytes.Clone(data(ref))
		ref.Close() // before the subtests, whose leak checks would count its engines
		for _, mode := range []string{"every", "random"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				d := openTest(t, Config{MemorySize: memSize})
				pattern(data(d))
				rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
				asked := 0
				d.engines[e].forcePreempt = func(*job) bool { // read by the engine only after the runlist below
					if mode == "every" || rng.IntN(3) == 0 {
						asked++
						return true
					}
					return false
				}
				const c = abi.Channel(9)
				// A second channel, idle, makes the runlist longer than one:
				// the engine runs preemptible commands in chunks.
				require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, c, 1, 0)}), "runlist")
				before := counter(d, e, abi.RegPreempts)
				i := publish(d, c, tc.cmd)
				require.Equal(t, abi.StatusOK, await(t, d, c, i), "%s preempted", tc.name)
				if got := counter(d, e, abi.RegPreempts) - before; got != uint64(asked) || asked == 0 {
					t.Errorf("RegPreempts moved by %d; the test asked for %d preemptions (want them equal, and some)", got, asked)
				}
				require.Equal(t, want, data(d), "%s preempted %d times: memory differs from the unpreempted run", tc.name, asked)
			})
		}
	}
}

// TestDelayIsPreemptedAndResumed: a DELAY preempted half-way resumes with
// the cycles it had done, so its total time on the engine is its count —
// it neither restarts nor skips — and the channel that preempted it runs
// in between.
//
// The order it asserts is in the device's time, and a loaded machine can
// take that order away without a bug: the DELAY counts the device clock,
// which runs while the host's goroutine waits for a CPU, so a host
// descheduled for longer than the DELAY publishes its fill after the
// DELAY is over (seen once with other test binaries running beside it).
// An engine descheduled past the DELAY's end finds it over at its next
// boundary, and completes it before it looks at the runlist. And an engine
// that has not yet taken the DELAY when the fill arrives (descheduled
// before it started) runs the fill first by priority, with nothing to
// preempt. A round that lost its window any of these ways is run again
// with a DELAY twice as long; a scheduler that never preempts loses every
// round, and the test fails after the longest (about 1 s) — so it still
// fails on the bug it is for.
func TestDelayIsPreemptedAndResumed(t *testing.T) {
	d := openTest(t, Config{})
	const e, low, high = abi.EngineCopy, abi.Channel(10), abi.Channel(11)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, low, abi.PriorityLow, 0), rlEntry(d, high, abi.PriorityHigh, 0)}), "runlist")
	for cycles := uint64(30_000_000); cycles <= 1_000_000_000; cycles *= 2 { // 30 ms, doubling
		preemptsBefore := counter(d, e, abi.RegPreempts)
		start := time.Now()
		i := publish(d, low, abi.Command{Op: abi.OpDelay, Value: cycles})
		time.Sleep(5 * time.Millisecond)
		j := publish(d, high, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: 3})
		lateHost := completed(d, low, i) // the DELAY ended before the fill was even published
		require.Equal(t, abi.StatusOK, await(t, d, high, j), "the high-priority fill")
		delayFirst := completed(d, low, i)
		require.Equal(t, abi.StatusOK, await(t, d, low, i), "the DELAY of %d cycles after resuming", cycles)
		preempts := counter(d, e, abi.RegPreempts) - preemptsBefore
		if lateHost || delayFirst || preempts == 0 {
			t.Logf("round lost (the %v DELAY: completed before the fill %v, ended before it was published %v, preempted %d times); "+
				"again with a longer DELAY", time.Duration(cycles), delayFirst, lateHost, preempts)
			continue
		}
		if elapsed := time.Since(start); elapsed < time.Duration(cycles) {
			t.Fatalf("the DELAY took %v in all; it counts %v of its own time, so a resume restarted it short",
				elapsed, time.Duration(cycles))
		}
		assert.Equal(t, uint64(1), preempts, "RegPreempts rose by %d; want 1: the fill should take one boundary, once", preempts)
		return
	}
	t.Fatalf("in no round, up to a DELAY of about 1 s, did the high-priority fill preempt the DELAY and complete first")
}

// completed reports whether channel c's completion entry holds index i.
func completed(d *Device, c abi.Channel, i uint64) bool { return entry(d, c, i) == i }

// TestHigherPriorityPreemptsAtTheNextBoundary: a high-priority command
// published while a long low-priority copy runs completes before it, with
// one preemption, and the copy's result is still exact.
func TestHigherPriorityPreemptsAtTheNextBoundary(t *testing.T) {
	const memSize = 40 << 20
	d := openTest(t, Config{MemorySize: memSize})
	const e, low, high = abi.EngineCopy, abi.Channel(12), abi.Channel(13)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, low, abi.PriorityNormal, 0), rlEntry(d, high, abi.PriorityHigh, 0)}), "runlist")
	mem := data(d)
	pattern(mem[:16<<20])
	src := bytes.Clone(mem[:16<<20])
	i := publish(d, low, abi.Command{Op: abi.OpCopy, Src: 0, Dst: 20 << 20, Size: 16 << 20})
	for !completed(d, low, i) && mem[20<<20+1] == 0 { // src[1] is 7 (pattern): the copy has started
		runtime.Gosched()
	}
	j := publish(d, high, abi.Command{Op: abi.OpFill, Dst: 38 << 20, Size: 64, Value: 1})
	require.Equal(t, abi.StatusOK, await(t, d, high, j), "the high-priority fill")
	copyDone := completed(d, low, i)
	require.Equal(t, abi.StatusOK, await(t, d, low, i), "the copy")
	require.Equal(t, src, mem[20<<20:36<<20], "the preempted copy's result differs from its source")
	if copyDone {
		t.Skip("the 16 MiB copy finished before the fill was published (a very slow host); nothing was preempted")
	}
	assert.Equal(t, uint64(1), counter(d, e, abi.RegPreempts), "RegPreempts; want 1: the fill should take one boundary, once")
}

// TestEqualChannelsShareTheEngine: four channels of equal priority with a
// 20 µs slice and equal queues of work progress together — when the first
// has finished, every other has done at least half of its commands — and a
// low-priority channel completes while higher ones still stream (it waits
// starveLimit at most, not until they are done).
func TestEqualChannelsShareTheEngine(t *testing.T) {
	const memSize = 16 << 20
	d := openTest(t, Config{MemorySize: memSize})
	const e = abi.EngineCopy
	chans := []abi.Channel{20, 21, 22, 23}
	var entries []abi.RunlistEntry
	for _, c := range chans {
		entries = append(entries, rlEntry(d, c, abi.PriorityNormal, 20_000))
	}
	const per = 200 // 256 KiB fills: about 200 × 12 µs of work each
	first := map[abi.Channel]uint64{}
	for k, c := range chans {
		cmds := make([]abi.Command, per)
		for n := range cmds {
			cmds[n] = abi.Command{Op: abi.OpFill, Dst: uint64(k) << 22, Size: 256 << 10, Value: uint64(n)}
		}
		first[c] = place(d, c, cmds...)
	}
	for _, c := range chans { // all four queues are full before any doorbell rings
		ringDoorbell(d, c, first[c]+per)
	}
	// The runlist last, so the engine finds all four with work at once. Had
	// it come first, the engine could serve the first channels while this
	// goroutine waited for a CPU between two doorbells — under -race, on two
	// cores, long enough for them to finish before the last was rung.
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, entries), "runlist")
	done := func(c abi.Channel) int {
		n := 0
		for n < per && completed(d, c, first[c]+uint64(n)) {
			n++
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		finished := false
		for _, c := range chans {
			finished = finished || done(c) == per
		}
		if finished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no channel finished its %d fills in 30 s", per)
		}
		time.Sleep(100 * time.Microsecond)
	}
	for _, c := range chans {
		if n := done(c); n < per/2 {
			t.Errorf("%v had done %d of %d when the first channel finished; want at least half", c, n, per)
		}
	}

	// Starvation: two high-priority channels stream for about 60 ms, each
	// ending in a FILL of its own flag; the low one's single command, a
	// COPY of both flags, must not wait for them to finish. What the COPY
	// read says where it ran among their commands, in the engine's order,
	// so no host timing enters the verdict. (An earlier version published
	// the low command after the runlist had started the high ones, and
	// looked at their completions once it saw its own: a host descheduled
	// for the rest of the 60 ms at either point failed it, starved or not.)
	// As above, every doorbell rings before the runlist that serves them.
	const low = abi.Channel(30)
	hi := []abi.Channel{31, 32}
	const flags, seen = 1 << 20, 2 << 20 // apart from the fills above, which are at k<<22
	mem := data(d)
	clear(mem[flags : flags+128])
	clear(mem[seen : seen+128])
	for k, c := range hi {
		cmds := make([]abi.Command, 200, 201)
		for n := range cmds {
			cmds[n] = abi.Command{Op: abi.OpDelay, Value: 150_000} // 150 µs each: 30 ms per channel
		}
		cmds = append(cmds, abi.Command{Op: abi.OpFill, Dst: flags + uint64(k)*64, Size: 64, Value: 1})
		publish(d, c, cmds...)
	}
	i := publish(d, low, abi.Command{Op: abi.OpCopy, Src: flags, Dst: seen, Size: 128})
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, hi[0], abi.PriorityHigh, 20_000), rlEntry(d, hi[1], abi.PriorityHigh, 20_000),
		rlEntry(d, low, abi.PriorityLow, 0)}), "runlist")
	require.Equal(t, abi.StatusOK, await(t, d, low, i), "the low-priority COPY")
	if mem[seen] == 1 && mem[seen+64] == 1 {
		t.Errorf("the low-priority COPY ran only after both high-priority channels had finished: starved")
	}
}

// TestARemovedChannelIsDrained: a runlist that drops a channel with work
// queued completes every command of it that was published and had not run
// — a preempted one included — with StatusRemoved, and writes their
// fences; the engine runs none of them, and serves the channel no more.
func TestARemovedChannelIsDrained(t *testing.T) {
	// The set-up needs drop's DELAY still running when keep's arrives, so
	// that keep preempts it. A host descheduled past the DELAY (a loaded
	// machine) loses that window: the DELAY completes, nothing is
	// preempted, and waiting for a preemption would wait for ever (it
	// did, once, under load). Such an attempt proves nothing and is made
	// again on a fresh device with a DELAY twice as long.
	for delay := uint64(50_000_000); delay <= 1_600_000_000; delay *= 2 {
		if drainRemovedChannel(t, delay) {
			return
		}
		t.Logf("the dropped channel's %v DELAY ended before it could be preempted (a loaded machine); again with a longer one",
			time.Duration(delay))
	}
	t.Fatalf("in no attempt, up to a DELAY of 1.6 s, did the kept channel's DELAY preempt the dropped channel's")
}

// drainRemovedChannel is one attempt of TestARemovedChannelIsDrained with
// a DELAY of delay cycles on the dropped channel; it reports false when
// the DELAY ended before it was preempted, so the attempt tested nothing.
func drainRemovedChannel(t *testing.T, delay uint64) bool {
	d := openTest(t, Config{})
	const e, keep, drop = abi.EngineCopy, abi.Channel(40), abi.Channel(41)
	kept := rlEntry(d, keep, abi.PriorityHigh, 0) // its state block is cleared once, here: keep may be saved in it later
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{kept, rlEntry(d, drop, abi.PriorityNormal, 0)}), "runlist")
	// drop: a long DELAY that keep's work will preempt, then fenced fills.
	first := publish(d, drop, abi.Command{Op: abi.OpDelay, Value: delay})
	for counter(d, e, abi.RegSwitches) == 0 && d.regs.Load(abi.EngineStatusPage(e)+abi.RegEngineState) != abi.EngineRunning {
		runtime.Gosched()
	}
	time.Sleep(time.Millisecond)                                           // the DELAY is running
	k := publish(d, keep, abi.Command{Op: abi.OpDelay, Value: 20_000_000}) // preempts it, and holds the engine
	for counter(d, e, abi.RegPreempts) == 0 {
		if completed(d, drop, first) {
			await(t, d, keep, k) // let keep's DELAY finish before the device closes
			return false
		}
		runtime.Gosched()
	}
	mem := data(d)
	clear(mem[:4096])
	var fills []abi.Command
	for n := range 5 {
		fills = append(fills, abi.Command{Op: abi.OpFill, Flags: abi.FlagFence, Fence: uint64(100 + n), Dst: uint64(n) * 64, Size: 64, Value: 0xee})
	}
	publish(d, drop, fills...)
	// The same entry for keep, its state block untouched: by now drop
	// may have waited out the starvation limit and preempted keep, whose
	// DELAY is then saved there. (Clearing it, as rlEntry does, made the
	// engine fault keep for a bad saved state — seen under CI's load.)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{kept}), "runlist without %v", drop)
	for i := first; i < first+6; i++ {
		if !completed(d, drop, i) || statusOf(d, drop, i) != abi.StatusRemoved {
			t.Errorf("command %d of the dropped channel: completed %v, status %v; want StatusRemoved", i-first, completed(d, drop, i), statusOf(d, drop, i))
		}
	}
	assert.Equal(t, uint64(104), d.regs.Load(abi.ChannelStatusPage(drop)+abi.RegFence), "the dropped channel's fence; want 104, its last fill's")
	assert.Equal(t, make([]byte, 4096), mem[:4096], "a fill of the dropped channel ran")
	assert.Equal(t, uint32(0), d.owner[drop].Load(), "the engine still owns the dropped channel")
	assert.Equal(t, abi.StatusOK, await(t, d, keep, k), "the kept channel's DELAY")
	return true
}
