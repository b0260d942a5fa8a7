package trace

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
)

func TestEventIsFixedSize(t *testing.T) {
	assert.Equal(t, uintptr(48), reflect.TypeFor[Event]().Size(), "sizeof(Event)")
}

// TestRingKeepsTheNewest: past capacity the oldest events go, Dropped
// counts them, and Events returns the rest oldest first.
func TestRingKeepsTheNewest(t *testing.T) {
	tests := []struct {
		capacity, recorded int
		wantFirst          uint64
		wantDropped        uint64
	}{
		{4, 0, 0, 0},
		{4, 3, 0, 0},
		{4, 4, 0, 0},
		{4, 5, 1, 1},
		{4, 11, 7, 7},
	}
	for _, tt := range tests {
		b := New(tt.capacity)
		for i := range tt.recorded {
			b.Record(Event{Kind: KindDoorbell, Start: uint64(i), Arg: uint64(i)})
		}
		got := b.Events()
		if !assert.Equal(t, min(tt.capacity, tt.recorded), len(got), "cap %d, %d recorded: %d events", tt.capacity, tt.recorded, len(got)) {
			continue
		}
		if len(got) > 0 && got[0].Arg != tt.wantFirst {
			t.Errorf("cap %d, %d recorded: first event %d; want %d", tt.capacity, tt.recorded, got[0].Arg, tt.wantFirst)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Start < got[i-1].Start {
				t.Errorf("cap %d, %d recorded: events out of order at %d", tt.capacity, tt.recorded, i)
			}
		}
		assert.Equal(t, tt.wantDropped, b.Dropped(), "cap %d, %d recorded: Dropped()", tt.capacity, tt.recorded)
	}
}

// traceFile is the part of the trace-event format the test checks.
type traceFile struct {
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
	TraceEvents     []struct {
		Ph   string         `json:"ph"`
		Cat  string         `json:"cat"`
		Name string         `json:"name"`
		Pid  *int           `json:"pid"`
		Tid  *int           `json:"tid"`
		Ts   *float64       `json:"ts"`
		Dur  *float64       `json:"dur"`
		S    string         `json:"s"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// TestJSONIsTraceEventFormat loads the JSON back and checks what the
// format requires: every event has ph, name, pid and tid; every
// non-metadata event a ts; complete events a dur; instants a scope; the
// tracks are named; and the events come sorted by ts.
func TestJSONIsTraceEventFormat(t *testing.T) {
	b := New(16)
	b.Record(Event{Kind: KindDoorbell, Start: 1500, Channel: 1, Arg: 1})
	b.Record(Event{Kind: KindCommand, Start: 2000, End: 2250, Engine: abi.EngineCopy, Channel: 1, Op: abi.OpFill,
		Seq: 1, Size: 64, Status: uint8(abi.StatusOK)})
	b.Record(Event{Kind: KindFault, Start: 1700, Channel: 0, Arg: uint64(abi.FaultDoorbell), Seq: 9})
	b.Record(Event{Kind: KindStop, Start: 3000, Engine: abi.EngineCompute})
	var buf bytes.Buffer
	require.NoError(t, b.WriteJSON(&buf, "stage-test"))
	var f traceFile
	require.NoError(t, json.Unmarshal(buf.Bytes(), &f), "the trace is not JSON\n%s", buf.String())
	if f.DisplayTimeUnit != "ns" || f.OtherData["format"] != formatVersion {
		t.Errorf("header: displayTimeUnit %q, format %v", f.DisplayTimeUnit, f.OtherData["format"])
	}
	tracks := map[int]string{}
	var lastTs float64
	var kinds []string
	for i, ev := range f.TraceEvents {
		if ev.Ph == "" || ev.Name == "" || ev.Pid == nil || ev.Tid == nil {
			t.Fatalf("event %d lacks ph, name, pid or tid: %+v", i, ev)
		}
		if ev.Ph == "M" {
			if ev.Name == "thread_name" {
				tracks[*ev.Tid] = ev.Args["name"].(string)
			}
			continue
		}
		if ev.Ts == nil || *ev.Ts < lastTs {
			t.Fatalf("event %d (%s): ts missing or out of order", i, ev.Name)
		}
		lastTs = *ev.Ts
		switch ev.Ph {
		case "X":
			if ev.Dur == nil || *ev.Dur < 0 {
				t.Errorf("complete event %d (%s) has no dur", i, ev.Name)
			}
		case "i":
			assert.Equal(t, "t", ev.S, "instant event %d (%s) has scope %q", i, ev.Name, ev.S)
		default:
			t.Errorf("event %d has ph %q", i, ev.Ph)
		}
		if _, ok := tracks[*ev.Tid]; !ok {
			t.Errorf("event %d (%s) is on track %d, which has no name", i, ev.Name, *ev.Tid)
		}
		kinds = append(kinds, ev.Name)
	}
	want := []string{"doorbell", "channel fault", "FILL", "stop"}
	require.Equal(t, len(want), len(kinds), "events %v; want %v", kinds, want)
	for i := range want {
		assert.Equal(t, want[i], kinds[i], "event %d is %q; want %q (sorted by ts)", i, kinds[i], want[i])
	}
	if tracks[engineTrack0+int(abi.EngineCopy)] != "engine copy" || tracks[channelTrack0+1] != "channel 1" {
		t.Errorf("track names %v", tracks)
	}
}
