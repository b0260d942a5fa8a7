// Package trace reads the device-side traces that softgpu's stages write,
// checks them against the Chrome trace-event format, summarises them for a
// terminal (Summarise, Summary.Format) and draws them as SVG timelines for
// the book (RenderSVG). tools/cmd/trace is its command.
//
// The flow:
//
//	stage (SOFTGPU_TRACE=path, written when a device closes)
//	  ──Load/Parse──▶ *Trace: Events in ts order, Tracks in lane order   (trace.go, validate.go)
//	  ──Summarise──▶ *Summary ──Format──▶ terminal tables                 (summary.go)
//	  ──RenderSVG──▶ an inline SVG for the book                           (timeline.go)
//
// # The file format: the contract between the stages and this package
//
// A trace is the JSON Object Format of the Chrome trace-event format, which
// Perfetto's legacy JSON importer and chrome://tracing open:
//
//	{
//	 "displayTimeUnit": "ns",
//	 "otherData": {"format": "softgpu-trace/1", "stage": "stage7-idle",
//	               "events": 1234, "dropped": 0,
//	               "clock": "device cycles since Open; 1 cycle = 1 ns; ts and dur in microseconds"},
//	 "traceEvents": [ ...events sorted by ts... ]
//	}
//
// ts and dur are microseconds as JSON numbers with up to three decimals
// (nanosecond precision: the device clock counts cycles, one per ns). The
// events the stages write:
//
//	ph  cat       name                 tid        args
//	M   -         process_name         0          name
//	M   -         thread_name          any        name ("engine compute", "channel 0", "driver")
//	M   -         thread_sort_index    any        sort_index (optional)
//	X   command   the opcode (FILL...) engine     engine, channel, seq, size, status ("ok" or an error)
//	X   idle      sleep                engine     wake_ns: the driver's wake call to the engine running
//	                                              (absent when close woke it)
//	i   doorbell  doorbell             channel    value: the tail the engine took (woke, whether it
//	                                              woke an engine, is read if present; no stage writes it)
//	i   irq       irq raise            engine     cause, channel
//	X   irq       irq handled          driver     cause
//	i   fault     channel fault        channel    fault, value
//	i   device    stop                 engine
//
// Tracks are threads of pid 1: engine e is tid 1+e, the driver is tid 10,
// channel c is tid 100+c. Later stages add the categories tlb (i: tlb
// miss, tlb invalidate; stage 5), fault (i: page fault, 5; i: stall and
// replay on an engine, X: fault batch and migrate to device|host on the
// driver, 8) and sched (X: "OP (preempted)" in category command with
// status "preempted", a slice that stopped at a chunk boundary; i: switch,
// runlist; 6). The category client (attach, detach) is reserved for stage
// 9, which does not write it yet. This package accepts any category and
// name, and draws and counts the ones it does not know as
// "other".
//
// # What Parse checks
//
// The fields the trace-event format documents, so that a file this package
// accepts opens in Perfetto without import errors: ph is one of X, i, I, M,
// B, E, C; name is a string (E may omit it); pid and tid are integers (a
// process-scoped metadata event may omit tid); every event but metadata has
// ts >= 0; X has dur >= 0; the scope s of an instant is g, p or t; args is an
// object; metadata names are the five the format defines, each with its
// argument; a counter's args are numbers; displayTimeUnit is ms or ns. Beyond
// the format, for softgpu's own contract: otherData.format, when present, is
// "softgpu-trace/1"; events are sorted by ts; complete (X) events on one
// track nest and never partly overlap (Perfetto draws such slices wrongly);
// every E closes a B on its track. Every problem names the event's index in
// traceEvents and the field.
//
// Invariants of a *Trace that Parse returns:
//   - Events holds every event but metadata, in file order, and
//     Events[i].Start <= Events[i+1].Start;
//   - every event's (PID, TID) is one Track's, and that Track's Events are
//     the same events in the same order;
//   - Tracks are in lane order: by pid, then engines, channels, the driver,
//     others, each by tid.
package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// FormatVersion is otherData.format in a softgpu trace. A change of meaning
// in any field bumps it, and Parse refuses any other value.
const FormatVersion = "softgpu-trace/1"

// Phases (the ph field) that Parse accepts.
const (
	PhaseComplete   = "X" // a slice with a duration
	PhaseInstant    = "i" // a point in time
	PhaseInstantOld = "I" // the format's deprecated spelling of i
	PhaseMetadata   = "M" // names and sort order of processes and threads
	PhaseBegin      = "B" // the start of a slice that an E ends
	PhaseEnd        = "E"
	PhaseCounter    = "C"
)

// Categories, names and arguments of the events the stages write (see the
// package comment). Others are accepted too.
const (
	CategoryCommand  = "command"
	CategoryIdle     = "idle"
	CategoryDoorbell = "doorbell"
	CategoryIRQ      = "irq"
	CategoryTLB      = "tlb"
	CategorySched    = "sched"
	CategoryFault    = "fault"
	CategoryClient   = "client"

	NameSleep = "sleep" // the X event of an engine asleep, category idle

	ArgStatus = "status"  // command: "ok" or the error
	ArgWakeNS = "wake_ns" // sleep: ns from the driver's wake call to the engine running
	ArgWoke   = "woke"    // doorbell: whether it woke a sleeping engine
)

// Thread ids of the tracks (pid 1).
const (
	FirstEngineTID  = 1   // engine e is FirstEngineTID + e
	DriverTID       = 10  // interrupt and fault handling
	FirstChannelTID = 100 // channel c is FirstChannelTID + c
)

// TrackKind says what a track stands for, from its tid.
type TrackKind int

// Lane order: engines first, then channels, the driver, anything else.
const (
	KindEngine TrackKind = iota
	KindChannel
	KindDriver
	KindOther
)

func (k TrackKind) String() string {
	switch k {
	case KindEngine:
		return "engine"
	case KindChannel:
		return "channel"
	case KindDriver:
		return "driver"
	}
	return "other"
}

// kindOf classifies a tid by the contract's numbering.
func kindOf(tid int64) TrackKind {
	switch {
	case tid >= FirstEngineTID && tid < DriverTID:
		return KindEngine
	case tid == DriverTID:
		return KindDriver
	case tid >= FirstChannelTID:
		return KindChannel
	}
	return KindOther
}

// Event is one trace event other than metadata.
type Event struct {
	Index    int           // position in the file's traceEvents, for messages
	Phase    string        // ph: one of the Phase constants but PhaseMetadata
	Category string        // cat; "" when absent
	Name     string        // name; "" only for an E without one
	PID, TID int64         // the track
	Start    time.Duration // ts: device time since Open (1 cycle = 1 ns)
	Duration time.Duration // dur of an X event; 0 for the others
	Scope    string        // s of an instant event ("g", "p", "t"); "" when absent
	Args     map[string]any
}

// End is when the event ends: Start + Duration.
func (e *Event) End() time.Duration { return e.Start + e.Duration }

// ArgString returns args[key] if it is a string.
func (e *Event) ArgString(key string) (string, bool) {
	s, ok := e.Args[key].(string)
	return s, ok
}

// ArgInt returns args[key] if it is a number, rounded to an integer.
func (e *Event) ArgInt(key string) (int64, bool) {
	n, ok := e.Args[key].(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false
	}
	return int64(f + 0.5), true
}

// ArgBool returns args[key] if it is a boolean.
func (e *Event) ArgBool(key string) (bool, bool) {
	b, ok := e.Args[key].(bool)
	return b, ok
}

// FormatArgs writes the args as "key=value" pairs sorted by key, the way
// tooltips and messages show them.
func (e *Event) FormatArgs() string {
	keys := sortedKeys(e.Args)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := e.Args[k]
		switch v := v.(type) {
		case string:
			parts[i] = k + "=" + v
		case json.Number:
			parts[i] = k + "=" + v.String()
		default:
			data, _ := json.Marshal(v) // maps marshal with sorted keys
			parts[i] = k + "=" + string(data)
		}
	}
	return strings.Join(parts, " ")
}

// Status is a command's status: args.status, "ok" when absent.
func (e *Event) Status() string {
	if s, ok := e.ArgString(ArgStatus); ok && s != "" {
		return s
	}
	return "ok"
}

// Track is one thread of the trace: an engine, a channel, the driver.
type Track struct {
	PID, TID int64
	Name     string // thread_name, or "tid N" when the trace names none
	Kind     TrackKind
	Events   []Event // this track's events, in file (and ts) order
}

// Trace is a parsed, valid trace file.
type Trace struct {
	Format          string // otherData.format: FormatVersion, or "" when absent
	Stage           string // otherData.stage
	Clock           string // otherData.clock
	Recorded        int64  // otherData.events: the events the writer says the file holds
	Dropped         int64  // otherData.dropped: events its ring overwrote
	DisplayTimeUnit string // "ns", "ms" or ""
	ProcessName     string // process_name of the lowest pid that has one

	Events []Event  // every event but metadata, sorted by Start
	Tracks []*Track // lane order
}

// Load reads and parses the trace file at path.
func Load(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("trace: %s: %w", path, err)
	}
	return t, nil
}

// Span returns the first event's start and the latest end of any event;
// both are 0 for a trace without events.
func (t *Trace) Span() (first, last time.Duration) {
	if len(t.Events) == 0 {
		return 0, 0
	}
	first = t.Events[0].Start
	for i := range t.Events {
		last = max(last, t.Events[i].End())
	}
	return first, last
}

// trackKey identifies a track.
type trackKey struct{ pid, tid int64 }

// buildTracks gathers the events into tracks named by the thread_name
// metadata, in lane order.
func buildTracks(events []Event, names map[trackKey]string, declared []trackKey) []*Track {
	byKey := map[trackKey]*Track{}
	var tracks []*Track
	add := func(k trackKey) *Track {
		if tr, ok := byKey[k]; ok {
			return tr
		}
		name, ok := names[k]
		if !ok {
			name = fmt.Sprintf("tid %d", k.tid)
		}
		tr := &Track{PID: k.pid, TID: k.tid, Name: name, Kind: kindOf(k.tid)}
		byKey[k] = tr
		tracks = append(tracks, tr)
		return tr
	}
	for _, k := range declared {
		add(k)
	}
	for _, e := range events {
		tr := add(trackKey{e.PID, e.TID})
		tr.Events = append(tr.Events, e)
	}
	sort.SliceStable(tracks, func(i, j int) bool {
		a, b := tracks[i], tracks[j]
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.TID < b.TID
	})
	return tracks
}
