package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// This file turns the bytes of a trace file into a *Trace, checking each
// event against the trace-event format's documented fields as it goes (the
// list is in the package comment). It collects every problem it finds, up
// to maxProblems, rather than stopping at the first, so that one run of
// `trace check` shows what a writer got wrong.

// maxProblems bounds the problems one ValidationError lists; the rest are
// only counted.
const maxProblems = 50

// ErrInvalid is what every validation failure wraps: errors.Is(err,
// ErrInvalid) tells a broken trace from a file that could not be read.
var ErrInvalid = errors.New("not a valid softgpu trace")

// Problem is one way a trace breaks the format.
type Problem struct {
	Index   int    // the event's index in traceEvents; -1 for the file itself
	Field   string // the field at fault ("ts", "args.name"); "" for the whole event
	Message string
}

func (p Problem) Error() string {
	where := "file"
	if p.Index >= 0 {
		where = fmt.Sprintf("event %d", p.Index)
	}
	if p.Field != "" {
		where += ": field " + p.Field
	}
	return where + ": " + p.Message
}

// ValidationError lists the problems Parse found.
type ValidationError struct {
	Problems []Problem
	More     int // problems found beyond those listed
}

func (e *ValidationError) Error() string {
	lines := []string{fmt.Sprintf("%v: %d problems", ErrInvalid, len(e.Problems)+e.More)}
	if len(e.Problems)+e.More == 1 {
		lines[0] = fmt.Sprintf("%v: 1 problem", ErrInvalid)
	}
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.Error())
	}
	if e.More > 0 {
		lines = append(lines, fmt.Sprintf("  and %d more", e.More))
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// parser collects the problems of one Parse.
type parser struct {
	problems []Problem
	more     int
}

func (p *parser) problem(index int, field, format string, args ...any) {
	if len(p.problems) >= maxProblems {
		p.more++
		return
	}
	p.problems = append(p.problems, Problem{Index: index, Field: field, Message: fmt.Sprintf(format, args...)})
}

// metadataArgs maps each metadata name the format defines to the argument
// it carries and whether that argument is a string (or else an integer).
var metadataArgs = map[string]struct {
	arg      string
	isString bool
	process  bool // process-scoped: tid may be absent
}{
	"process_name":       {"name", true, true},
	"process_labels":     {"labels", true, true},
	"process_sort_index": {"sort_index", false, true},
	"thread_name":        {"name", true, false},
	"thread_sort_index":  {"sort_index", false, false},
}

// Parse parses and validates a trace file's contents. The error, when the
// file is JSON but breaks the format, is a *ValidationError wrapping
// ErrInvalid.
func Parse(data []byte) (*Trace, error) {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var top any
	if err := decoder.Decode(&top); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %w", ErrInvalid, err)
	}
	if decoder.More() {
		return nil, fmt.Errorf("%w: not JSON: data after the top-level value", ErrInvalid)
	}
	p := &parser{}
	t := &Trace{}
	var raw []any
	switch top := top.(type) {
	case []any: // the JSON Array Format: events only
		raw = top
	case map[string]any:
		raw = p.header(t, top)
	default:
		return nil, fmt.Errorf("%w: the top level is neither an object with traceEvents nor an array of events", ErrInvalid)
	}

	names := map[trackKey]string{}
	var declared []trackKey
	processPID := int64(math.MaxInt64)
	for i, v := range raw {
		fields, ok := v.(map[string]any)
		if !ok {
			p.problem(i, "", "not an object")
			continue
		}
		e, meta, ok := p.event(i, fields)
		if !ok {
			continue
		}
		if meta == nil {
			t.Events = append(t.Events, e)
			continue
		}
		switch meta.name {
		case "thread_name":
			k := trackKey{e.PID, e.TID}
			if _, dup := names[k]; !dup {
				declared = append(declared, k)
			}
			names[k] = meta.value
		case "thread_sort_index":
			declared = append(declared, trackKey{e.PID, e.TID})
		case "process_name":
			if e.PID < processPID {
				processPID, t.ProcessName = e.PID, meta.value
			}
		}
	}
	p.order(t.Events)
	if len(p.problems) > 0 {
		return nil, &ValidationError{Problems: p.problems, More: p.more}
	}
	t.Tracks = buildTracks(t.Events, names, declared)
	return t, nil
}

// header reads the top-level object and returns its traceEvents.
func (p *parser) header(t *Trace, top map[string]any) []any {
	if unit, ok := top["displayTimeUnit"]; ok {
		s, _ := unit.(string)
		if s != "ms" && s != "ns" {
			p.problem(-1, "displayTimeUnit", "%s; want \"ms\" or \"ns\"", describe(unit))
		}
		t.DisplayTimeUnit = s
	}
	if other, ok := top["otherData"]; ok {
		fields, ok := other.(map[string]any)
		if !ok {
			p.problem(-1, "otherData", "%s; want an object", describe(other))
		} else {
			t.Format = p.optionalString(-1, fields, "otherData.format", "format")
			if t.Format != "" && t.Format != FormatVersion {
				p.problem(-1, "otherData.format", "%q; this tool reads %q", t.Format, FormatVersion)
			}
			t.Stage = p.optionalString(-1, fields, "otherData.stage", "stage")
			t.Clock = p.optionalString(-1, fields, "otherData.clock", "clock")
			t.Recorded = p.optionalCount(fields, "otherData.events", "events")
			t.Dropped = p.optionalCount(fields, "otherData.dropped", "dropped")
		}
	}
	events, ok := top["traceEvents"]
	if !ok {
		p.problem(-1, "traceEvents", "missing")
		return nil
	}
	list, ok := events.([]any)
	if !ok {
		p.problem(-1, "traceEvents", "%s; want an array", describe(events))
	}
	return list
}

// metadata is what a metadata event says.
type metadata struct{ name, value string }

// event checks one event. It returns the event, and for a metadata event
// also what it names; ok is false when the event has a problem.
func (p *parser) event(i int, fields map[string]any) (e Event, meta *metadata, ok bool) {
	before := len(p.problems) + p.more
	e.Index = i
	phase, has := fields["ph"].(string)
	switch {
	case !has:
		p.problem(i, "ph", "%s; want one of X, i, I, M, B, E, C", describe(fields["ph"]))
		return e, nil, false
	case !knownPhase(phase):
		p.problem(i, "ph", "%q is not a phase this tool reads; want one of X, i, I, M, B, E, C", phase)
		return e, nil, false
	}
	e.Phase = phase

	name, hasName := fields["name"]
	switch {
	case !hasName && phase != PhaseEnd:
		p.problem(i, "name", "missing")
	case hasName:
		if s, ok := name.(string); ok {
			e.Name = s
		} else {
			p.problem(i, "name", "%s; want a string", describe(name))
		}
	}
	e.Category = p.optionalString(i, fields, "cat", "cat")

	metaSpec, knownMeta := metadataArgs[e.Name]
	e.PID, _ = p.integer(i, fields, "pid", true)
	e.TID, _ = p.integer(i, fields, "tid", !(phase == PhaseMetadata && knownMeta && metaSpec.process))

	if args, has := fields["args"]; has {
		if m, ok := args.(map[string]any); ok {
			e.Args = m
		} else {
			p.problem(i, "args", "%s; want an object", describe(args))
		}
	}

	if phase == PhaseMetadata {
		if !knownMeta {
			p.problem(i, "name", "%q is not a metadata name; want process_name, process_labels, process_sort_index, thread_name or thread_sort_index", e.Name)
			return e, nil, false
		}
		meta = &metadata{name: e.Name}
		field, want := "args."+metaSpec.arg, "an integer"
		if metaSpec.isString {
			want = "a string"
		}
		v := e.Args[metaSpec.arg]
		_, argsPresent := fields["args"]
		switch v := v.(type) {
		case string:
			if metaSpec.isString {
				meta.value = v
				break
			}
			p.problem(i, field, "%s; want %s", describe(v), want)
		case json.Number:
			if _, err := v.Int64(); metaSpec.isString || err != nil {
				p.problem(i, field, "%s; want %s", describe(v), want)
			}
		default:
			if e.Args != nil || !argsPresent { // a non-object args is reported above
				p.problem(i, field, "%s; want %s", describe(v), want)
			}
		}
		return e, meta, len(p.problems)+p.more == before
	}

	ts, ok := p.microseconds(i, fields, "ts")
	if ok {
		e.Start = ts
	}
	switch phase {
	case PhaseComplete:
		if dur, ok := p.microseconds(i, fields, "dur"); ok {
			e.Duration = dur
		}
	case PhaseInstant, PhaseInstantOld:
		if s, has := fields["s"]; has {
			scope, _ := s.(string)
			if scope != "g" && scope != "p" && scope != "t" {
				p.problem(i, "s", "%s; want \"g\", \"p\" or \"t\"", describe(s))
			}
			e.Scope = scope
		}
	case PhaseCounter:
		if e.Args == nil {
			p.problem(i, "args", "missing; a counter's values are its args")
		}
		for _, k := range sortedKeys(e.Args) {
			if _, ok := e.Args[k].(json.Number); !ok {
				p.problem(i, "args."+k, "%s; a counter's values are numbers", describe(e.Args[k]))
			}
		}
	}
	return e, nil, len(p.problems)+p.more == before
}

// order checks what the format leaves to the writer and softgpu promises:
// events sorted by ts, X events on a track nested (never partly
// overlapping), and each E closing a B of its track.
func (p *parser) order(events []Event) {
	type open struct {
		index    int
		start    time.Duration
		end      time.Duration
		category string
	}
	complete := map[trackKey][]open{} // per track, the X events still open, outermost first
	begun := map[trackKey][]int{}     // per track, the B events not yet ended
	sorted := true
	for i := range events {
		e := &events[i]
		if i > 0 && e.Start < events[i-1].Start {
			p.problem(e.Index, "ts", "%s is before the previous event's %s; events must be sorted by ts",
				FormatTimestamp(e.Start), FormatTimestamp(events[i-1].Start))
			sorted = false
		}
		k := trackKey{e.PID, e.TID}
		switch e.Phase {
		case PhaseComplete:
			if !sorted {
				continue
			}
			stack := complete[k]
			for len(stack) > 0 && stack[len(stack)-1].end <= e.Start {
				stack = stack[:len(stack)-1]
			}
			if n := len(stack); n > 0 {
				top := stack[n-1]
				if top.start < e.Start && e.End() > top.end {
					p.problem(e.Index, "dur", "%s to %s overlaps event %d (%s to %s) on track pid %d tid %d without nesting in it; Perfetto draws such slices wrongly",
						FormatTimestamp(e.Start), FormatTimestamp(e.End()), top.index, FormatTimestamp(top.start), FormatTimestamp(top.end), e.PID, e.TID)
				}
			}
			complete[k] = append(stack, open{e.Index, e.Start, e.End(), e.Category})
		case PhaseBegin:
			begun[k] = append(begun[k], e.Index)
		case PhaseEnd:
			if n := len(begun[k]); n > 0 {
				begun[k] = begun[k][:n-1]
			} else {
				p.problem(e.Index, "ph", "E with no open B on track pid %d tid %d", e.PID, e.TID)
			}
		}
	}
}

// microseconds reads a required, non-negative time field in µs and
// returns it in ns.
func (p *parser) microseconds(i int, fields map[string]any, key string) (time.Duration, bool) {
	v, has := fields[key]
	if !has {
		p.problem(i, key, "missing")
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		p.problem(i, key, "%s; want a number of microseconds", describe(v))
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f > float64(math.MaxInt64)/1e3 {
		p.problem(i, key, "%s is out of range", n)
		return 0, false
	}
	if f < 0 {
		p.problem(i, key, "%s is negative; want >= 0", n)
		return 0, false
	}
	return time.Duration(math.Round(f * 1e3)), true
}

// integer reads an integer field, required or not.
func (p *parser) integer(i int, fields map[string]any, key string, required bool) (int64, bool) {
	v, has := fields[key]
	if !has {
		if required {
			p.problem(i, key, "missing")
		}
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		p.problem(i, key, "%s; want an integer", describe(v))
		return 0, false
	}
	x, err := n.Int64()
	if err != nil {
		p.problem(i, key, "%s; want an integer", n)
		return 0, false
	}
	return x, true
}

// optionalString reads a string field that may be absent.
func (p *parser) optionalString(i int, fields map[string]any, field, key string) string {
	v, has := fields[key]
	if !has {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.problem(i, field, "%s; want a string", describe(v))
	}
	return s
}

// optionalCount reads a non-negative integer of otherData that may be absent.
func (p *parser) optionalCount(fields map[string]any, field, key string) int64 {
	v, has := fields[key]
	if !has {
		return 0
	}
	if n, ok := v.(json.Number); ok {
		if x, err := n.Int64(); err == nil && x >= 0 {
			return x
		}
	}
	p.problem(-1, field, "%s; want a count (an integer >= 0)", describe(v))
	return 0
}

// describe names a decoded JSON value for a message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "missing or null"
	case string:
		return fmt.Sprintf("%q", v)
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprintf("%t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// knownPhase reports whether ph is one of the phases Parse reads.
func knownPhase(ph string) bool {
	switch ph {
	case PhaseComplete, PhaseInstant, PhaseInstantOld, PhaseMetadata, PhaseBegin, PhaseEnd, PhaseCounter:
		return true
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
