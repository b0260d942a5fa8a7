package trace

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// load loads a testdata trace or fails the test.
func load(t testing.TB, name string) *Trace {
	t.Helper()
	tr, err := Load(filepath.Join("testdata", name))
	require.NoError(t, err, "Load(%s)", name)
	return tr
}

func trackNames(tr *Trace) []string {
	var names []string
	for _, track := range tr.Tracks {
		names = append(names, track.Name)
	}
	return names
}

func TestLoadGood(t *testing.T) {
	tests := []struct {
		file       string
		stage      string
		events     int
		dropped    int64
		tracks     []string // lane order
		trackKinds []TrackKind
	}{
		{
			file: "good/stage7.json", stage: "stage7-idle", events: 15,
			tracks:     []string{"engine compute", "engine copy", "channel 0", "channel 1", "driver"},
			trackKinds: []TrackKind{KindEngine, KindEngine, KindChannel, KindChannel, KindDriver},
		},
		{
			file: "good/later-stages.json", stage: "stage8-managed", events: 9, dropped: 2,
			tracks:     []string{"engine compute", "channel 0", "driver", "fault buffer"},
			trackKinds: []TrackKind{KindEngine, KindChannel, KindDriver, KindOther},
		},
		{
			file: "good/array.json", events: 2,
			tracks: []string{"engine copy"}, trackKinds: []TrackKind{KindEngine},
		},
		{
			file: "good/escape.json", stage: `stage<0> & "friends"`, events: 2,
			tracks: []string{"engine <compute> & 'co'", `channel "0"`}, trackKinds: []TrackKind{KindEngine, KindChannel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tr := load(t, tt.file)
			if tr.Stage != tt.stage || len(tr.Events) != tt.events || tr.Dropped != tt.dropped {
				t.Errorf("Load(%s): stage %q, %d events, %d dropped; want %q, %d, %d", tt.file, tr.Stage, len(tr.Events), tr.Dropped, tt.stage, tt.events, tt.dropped)
			}
			if got := trackNames(tr); !slices.Equal(got, tt.tracks) {
				t.Errorf("Load(%s) tracks = %q; want %q", tt.file, got, tt.tracks)
			}
			var kinds []TrackKind
			total := 0
			for _, track := range tr.Tracks {
				kinds = append(kinds, track.Kind)
				total += len(track.Events)
				for _, e := range track.Events {
					if e.PID != track.PID || e.TID != track.TID {
						t.Errorf("event %d (pid %d tid %d) is on track %q (pid %d tid %d)", e.Index, e.PID, e.TID, track.Name, track.PID, track.TID)
					}
				}
			}
			if !slices.Equal(kinds, tt.trackKinds) {
				t.Errorf("Load(%s) track kinds = %v; want %v", tt.file, kinds, tt.trackKinds)
			}
			assert.Equal(t, len(tr.Events), total, "Load(%s): tracks hold %d events; the trace %d", tt.file, total, len(tr.Events))
			for i := 1; i < len(tr.Events); i++ {
				if tr.Events[i].Start < tr.Events[i-1].Start {
					t.Errorf("Load(%s): event %d starts before event %d", tt.file, tr.Events[i].Index, tr.Events[i-1].Index)
				}
			}
		})
	}
}

func TestParseTimes(t *testing.T) {
	tr := load(t, "good/stage7.json")
	// 1.100 µs and 0.060 µs are not exact in binary; they must still come
	// out as whole nanoseconds.
	e := tr.Events[2]
	if e.Name != "FILL" || e.Start != 1100*time.Nanosecond || e.Duration != 60*time.Nanosecond {
		t.Errorf("event %d = %s at %v for %v; want FILL at 1.1µs for 60ns", e.Index, e.Name, e.Start, e.Duration)
	}
	assert.Equal(t, "channel=1 engine=copy seq=2 size=64 status=ok", e.FormatArgs(), "FormatArgs()")
	if seq, ok := e.ArgInt("seq"); !ok || seq != 2 {
		t.Errorf("ArgInt(seq) = %d, %v; want 2, true", seq, ok)
	}
}

// event wraps one event in a valid file around it.
func event(e string) string {
	return `{"traceEvents":[{"ph":"X","name":"ok","pid":1,"tid":1,"ts":0,"dur":1},` + e + `]}`
}

func TestParseBad(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		index int    // -1: the file
		field string // the field the problem names
		text  string // in the message
	}{
		{"not JSON", `{"traceEvents": [`, -2, "", "not JSON"},
		{"trailing data", `{"traceEvents": []} {}`, -2, "", "after the top-level value"},
		{"top level string", `"trace"`, -2, "", "neither an object"},
		{"no traceEvents", `{"displayTimeUnit":"ns"}`, -1, "traceEvents", "missing"},
		{"traceEvents not an array", `{"traceEvents":{}}`, -1, "traceEvents", "want an array"},
		{"display unit", `{"displayTimeUnit":"us","traceEvents":[]}`, -1, "displayTimeUnit", `"us"`},
		{"other format version", `{"otherData":{"format":"softgpu-trace/2"},"traceEvents":[]}`, -1, "otherData.format", "softgpu-trace/1"},
		{"dropped not a count", `{"otherData":{"dropped":-1},"traceEvents":[]}`, -1, "otherData.dropped", "want a count"},
		{"event not an object", event(`7`), 1, "", "not an object"},
		{"no ph", event(`{"name":"x","pid":1,"tid":1,"ts":1}`), 1, "ph", "want one of"},
		{"unknown ph", event(`{"ph":"b","name":"x","pid":1,"tid":1,"ts":1}`), 1, "ph", `"b" is not a phase`},
		{"no name", event(`{"ph":"i","pid":1,"tid":1,"ts":1}`), 1, "name", "missing"},
		{"name a number", event(`{"ph":"i","name":3,"pid":1,"tid":1,"ts":1}`), 1, "name", "want a string"},
		{"no pid", event(`{"ph":"i","name":"x","tid":1,"ts":1}`), 1, "pid", "missing"},
		{"no tid", event(`{"ph":"i","name":"x","pid":1,"ts":1}`), 1, "tid", "missing"},
		{"tid a string", event(`{"ph":"i","name":"x","pid":1,"tid":"2","ts":1}`), 1, "tid", "want an integer"},
		{"pid fractional", event(`{"ph":"i","name":"x","pid":1.5,"tid":1,"ts":1}`), 1, "pid", "want an integer"},
		{"no ts", event(`{"ph":"i","name":"x","pid":1,"tid":1}`), 1, "ts", "missing"},
		{"ts a string", event(`{"ph":"i","name":"x","pid":1,"tid":1,"ts":"1"}`), 1, "ts", "want a number"},
		{"negative ts", event(`{"ph":"i","name":"x","pid":1,"tid":1,"ts":-1}`), 1, "ts", "negative"},
		{"no dur", event(`{"ph":"X","name":"x","pid":1,"tid":1,"ts":1}`), 1, "dur", "missing"},
		{"negative dur", event(`{"ph":"X","name":"x","pid":1,"tid":1,"ts":1,"dur":-0.001}`), 1, "dur", "negative"},
		{"bad scope", event(`{"ph":"i","s":"q","name":"x","pid":1,"tid":1,"ts":1}`), 1, "s", `want "g", "p" or "t"`},
		{"args not an object", event(`{"ph":"i","name":"x","pid":1,"tid":1,"ts":1,"args":[1]}`), 1, "args", "want an object"},
		{"cat a number", event(`{"ph":"i","cat":5,"name":"x","pid":1,"tid":1,"ts":1}`), 1, "cat", "want a string"},
		{"unknown metadata", event(`{"ph":"M","name":"thread_colour","pid":1,"tid":1,"args":{"name":"x"}}`), 1, "name", "not a metadata name"},
		{"thread_name without args", event(`{"ph":"M","name":"thread_name","pid":1,"tid":1}`), 1, "args.name", "missing"},
		{"thread_name a number", event(`{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":4}}`), 1, "args.name", "want a string"},
		{"sort index a string", event(`{"ph":"M","name":"thread_sort_index","pid":1,"tid":1,"args":{"sort_index":"1"}}`), 1, "args.sort_index", "want an integer"},
		{"thread metadata without tid", event(`{"ph":"M","name":"thread_name","pid":1,"args":{"name":"x"}}`), 1, "tid", "missing"},
		{"counter without args", event(`{"ph":"C","name":"x","pid":1,"tid":1,"ts":1}`), 1, "args", "missing"},
		{"counter with a string", event(`{"ph":"C","name":"x","pid":1,"tid":1,"ts":1,"args":{"n":"3"}}`), 1, "args.n", "numbers"},
		{"unsorted", event(`{"ph":"i","name":"x","pid":1,"tid":2,"ts":0.5},{"ph":"i","name":"y","pid":1,"tid":2,"ts":0.25}`), 2, "ts", "sorted by ts"},
		{"overlap on a track", event(`{"ph":"X","name":"y","pid":1,"tid":1,"ts":0.5,"dur":1}`), 1, "dur", "overlaps event 0"},
		{"E without B", event(`{"ph":"E","pid":1,"tid":1,"ts":2}`), 1, "ph", "no open B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			require.ErrorIs(t, err, ErrInvalid, "Parse(%s) wrapping ErrInvalid", tt.json)
			if tt.index == -2 { // not a trace at all: no event to name
				if !strings.Contains(err.Error(), tt.text) {
					t.Errorf("Parse(%s) = %v; want it to say %q", tt.json, err, tt.text)
				}
				return
			}
			var invalid *ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Parse(%s) = %v; want a *ValidationError", tt.json, err)
			}
			assert.Equal(t, 1, len(invalid.Problems), "Parse(%s): %d problems; want 1:\n%v", tt.json, len(invalid.Problems), err)
			p := invalid.Problems[0]
			if p.Index != tt.index || p.Field != tt.field || !strings.Contains(p.Message, tt.text) {
				t.Errorf("Parse(%s) problem = %+v; want index %d, field %q, a message with %q", tt.json, p, tt.index, tt.field, tt.text)
			}
		})
	}
}

// TestParseGoodEdges: what the format allows and a strict reading might
// refuse.
func TestParseGoodEdges(t *testing.T) {
	tests := []struct{ name, json string }{
		{"E without a name", event(`{"ph":"B","name":"x","pid":1,"tid":2,"ts":1},{"ph":"E","pid":1,"tid":2,"ts":2}`)},
		{"process metadata without tid", event(`{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}}`)},
		{"nested X", event(`{"ph":"X","name":"outer","pid":1,"tid":2,"ts":1,"dur":10},{"ph":"X","name":"inner","pid":1,"tid":2,"ts":2,"dur":3}`)},
		{"same start, longer second", event(`{"ph":"X","name":"a","pid":1,"tid":2,"ts":1,"dur":1},{"ph":"X","name":"b","pid":1,"tid":2,"ts":1,"dur":3}`)},
		{"back to back", event(`{"ph":"X","name":"next","pid":1,"tid":1,"ts":1,"dur":1}`)},
		{"overlap on another track", event(`{"ph":"X","name":"y","pid":1,"tid":2,"ts":0.5,"dur":1}`)},
		{"unknown fields and categories", event(`{"ph":"i","cat":"brand new","name":"z","pid":1,"tid":1,"ts":1,"id":"0x1","bp":"e"}`)},
		{"no otherData", `{"traceEvents":[]}`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.json))
		assert.NoError(t, err, "Parse(%s: %s)", tt.name, tt.json)
	}
}

func TestLoadBadFiles(t *testing.T) {
	tests := []struct {
		file     string
		problems []string // each Problem.Error(), in order
	}{
		{"bad/unsorted.json", []string{"event 2: field ts: 3.000 µs is before the previous event's 5.000 µs; events must be sorted by ts"}},
		{"bad/fields.json", []string{
			`file: field displayTimeUnit: "us"; want "ms" or "ns"`,
			`file: field otherData.format: "softgpu-trace/2"; this tool reads "softgpu-trace/1"`,
			`event 0: field name: "thread_colour" is not a metadata name; want process_name, process_labels, process_sort_index, thread_name or thread_sort_index`,
			`event 1: field dur: -0.5 is negative; want >= 0`,
			`event 2: field s: "x"; want "g", "p" or "t"`,
			`event 3: field ph: "Q" is not a phase this tool reads; want one of X, i, I, M, B, E, C`,
			`event 4: field pid: "one"; want an integer`,
			`event 5: field name: missing`,
			`event 5: field ts: missing`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tt.file))
			var invalid *ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Load(%s) = %v; want a *ValidationError", tt.file, err)
			}
			var got []string
			for _, p := range invalid.Problems {
				got = append(got, p.Error())
			}
			if !slices.Equal(got, tt.problems) {
				t.Errorf("Load(%s) problems:\n%s\nwant:\n%s", tt.file, strings.Join(got, "\n"), strings.Join(tt.problems, "\n"))
			}
		})
	}
}

func TestProblemLimit(t *testing.T) {
	var events []string
	for range maxProblems + 7 {
		events = append(events, `{"ph":"i","name":"x","pid":1,"tid":1}`)
	}
	_, err := Parse([]byte(`{"traceEvents":[` + strings.Join(events, ",") + `]}`))
	var invalid *ValidationError
	if !errors.As(err, &invalid) || len(invalid.Problems) != maxProblems || invalid.More != 7 {
		t.Fatalf("Parse(%d events without ts) = %v; want %d problems listed and 7 more", maxProblems+7, err, maxProblems)
	}
	if !strings.Contains(err.Error(), "and 7 more") {
		t.Errorf("error text lacks the count of the rest:\n%v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.json"))
	if err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing file) = %v; want an error that is not ErrInvalid", err)
	}
}
