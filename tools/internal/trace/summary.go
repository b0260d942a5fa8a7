package trace

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// This file summarises a trace for a terminal: what each engine did with
// its time, how fast it woke, what each channel and the driver saw, and
// how many events of each kind there are.
//
// An engine's time is split over the trace's span (the first event's start
// to the last event's end, the same for every track, so the rows compare):
//
//	Busy      = the sum of its command X events
//	Asleep    = the sum of its idle/sleep X events
//	IdleAwake = span − Busy − Asleep (awake with nothing to run: spinning,
//	            polling, or between events), never below 0
//
// Sums, not unions: the contract puts one command at a time on an engine
// and never a command inside a sleep, so the two are the same on a valid
// softgpu trace.
//
// Wake latency is the wake_ns argument of the sleeps that have one; its
// percentiles are nearest-rank (p99 of fewer than 100 sleeps is the
// maximum).

// Summary is what Summarise finds in a trace.
type Summary struct {
	Stage    string        // otherData.stage
	Events   int           // events other than metadata
	Recorded int64         // otherData.events: the events the writer says the file holds
	Dropped  int64         // otherData.dropped: events the device's ring overwrote
	First    time.Duration // the first event's start
	Last     time.Duration // the latest end of any event
	Tracks   []TrackSummary
	Counts   []Count // every event by category and name, sorted by both
}

// Span is Last − First: the time the trace covers.
func (s *Summary) Span() time.Duration { return s.Last - s.First }

// TrackSummary is one track's share of a Summary.
type TrackSummary struct {
	Name   string
	Kind   TrackKind
	PID    int64
	TID    int64
	Events int

	// Engines: time split over the trace's span, and commands.
	Busy      time.Duration
	Asleep    time.Duration
	IdleAwake time.Duration
	Commands  []CommandCount // by name, then status
	Sleeps    int
	Wake      Latency // over the sleeps with a wake_ns

	Doorbells     int // doorbell instants
	DoorbellsWoke int // of which woke a sleeping engine (args.woke; the stages do not write it)
	Interrupts    int // events of category irq ("irq raise" on an engine, "irq handled" on the driver)
}

// CommandCount counts one opcode with one status on one engine.
type CommandCount struct {
	Name   string
	Status string
	Count  int
	Total  time.Duration // the sum of their durations
}

// Latency is a distribution of wake latencies.
type Latency struct {
	Count         int
	P50, P99, Max time.Duration
}

// Count is how many events of one category and name a trace holds.
type Count struct {
	Category string // "" for events without one
	Name     string
	Count    int
}

// Summarise computes t's Summary.
func Summarise(t *Trace) *Summary {
	s := &Summary{Stage: t.Stage, Events: len(t.Events), Recorded: t.Recorded, Dropped: t.Dropped}
	s.First, s.Last = t.Span()
	span := s.Span()

	counts := map[Count]int{}
	for i := range t.Events {
		counts[Count{Category: t.Events[i].Category, Name: t.Events[i].Name}]++
	}
	for c, n := range counts {
		c.Count = n
		s.Counts = append(s.Counts, c)
	}
	sort.Slice(s.Counts, func(i, j int) bool {
		a, b := s.Counts[i], s.Counts[j]
		if a.Category != b.Category {
			return a.Category < b.Category
		}
		return a.Name < b.Name
	})

	for _, tr := range t.Tracks {
		s.Tracks = append(s.Tracks, summariseTrack(tr, span))
	}
	return s
}

func summariseTrack(tr *Track, span time.Duration) TrackSummary {
	ts := TrackSummary{Name: tr.Name, Kind: tr.Kind, PID: tr.PID, TID: tr.TID, Events: len(tr.Events)}
	type commandKey struct{ name, status string }
	commands := map[commandKey]*CommandCount{}
	var wakes []time.Duration
	for i := range tr.Events {
		e := &tr.Events[i]
		switch {
		case e.Category == CategoryCommand && e.Phase == PhaseComplete:
			ts.Busy += e.Duration
			k := commandKey{e.Name, e.Status()}
			c, ok := commands[k]
			if !ok {
				c = &CommandCount{Name: k.name, Status: k.status}
				commands[k] = c
			}
			c.Count++
			c.Total += e.Duration
		case e.Category == CategoryIdle && e.Name == NameSleep && e.Phase == PhaseComplete:
			ts.Asleep += e.Duration
			ts.Sleeps++
			if ns, ok := e.ArgInt(ArgWakeNS); ok {
				wakes = append(wakes, time.Duration(ns))
			}
		case e.Category == CategoryDoorbell:
			ts.Doorbells++
			if woke, _ := e.ArgBool(ArgWoke); woke {
				ts.DoorbellsWoke++
			}
		case e.Category == CategoryIRQ:
			ts.Interrupts++
		}
	}
	if tr.Kind == KindEngine {
		ts.IdleAwake = max(0, span-ts.Busy-ts.Asleep)
	}
	for _, c := range commands {
		ts.Commands = append(ts.Commands, *c)
	}
	sort.Slice(ts.Commands, func(i, j int) bool {
		a, b := ts.Commands[i], ts.Commands[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Status < b.Status
	})
	ts.Wake = latency(wakes)
	return ts
}

// latency sorts values and takes their nearest-rank percentiles.
func latency(values []time.Duration) Latency {
	if len(values) == 0 {
		return Latency{}
	}
	sort.Slice(values, func(i, j int) bool { return values[i] < values[j] })
	return Latency{
		Count: len(values),
		P50:   nearestRank(values, 50),
		P99:   nearestRank(values, 99),
		Max:   values[len(values)-1],
	}
}

// nearestRank is the smallest value with at least p% of values at or
// below it. sorted must be sorted and not empty.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n), 1-based
	return sorted[max(rank, 1)-1]
}

// Format writes the summary as tables for a terminal.
func (s *Summary) Format(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	stage := s.Stage
	if stage == "" {
		stage = "trace"
	}
	fmt.Fprintf(tw, "%s: %d events, %d dropped; span %s, from %s to %s\n",
		stage, s.Events, s.Dropped, FormatDuration(s.Span()), FormatTimestamp(s.First), FormatTimestamp(s.Last))
	if s.Dropped > 0 {
		fmt.Fprintf(tw, "warning: the device's trace ring overwrote %d events; the earliest are missing and the span starts late\n", s.Dropped)
	}

	var engines []TrackSummary
	for _, ts := range s.Tracks {
		if ts.Kind == KindEngine {
			engines = append(engines, ts)
		}
	}
	if len(engines) > 0 {
		fmt.Fprintf(tw, "\nengine\tbusy\t\tasleep\t\tidle awake\t\tcommands\tsleeps\twake p50\twake p99\twake max\n")
		for _, e := range engines {
			commands := 0
			for _, c := range e.Commands {
				commands += c.Count
			}
			wake := []string{"-", "-", "-"}
			if e.Wake.Count > 0 {
				wake = []string{FormatDuration(e.Wake.P50), FormatDuration(e.Wake.P99), FormatDuration(e.Wake.Max)}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.Name,
				FormatDuration(e.Busy), formatPercent(e.Busy, s.Span()),
				FormatDuration(e.Asleep), formatPercent(e.Asleep, s.Span()),
				FormatDuration(e.IdleAwake), formatPercent(e.IdleAwake, s.Span()),
				commands, e.Sleeps, strings.Join(wake, "\t"))
		}

		fmt.Fprintf(tw, "\ncommand\tengine\tstatus\tcount\ttime\tmean\n")
		for _, e := range engines {
			for _, c := range e.Commands {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, e.Name, c.Status, c.Count,
					FormatDuration(c.Total), FormatDuration(c.Total/time.Duration(c.Count)))
			}
		}
	}

	// The stages' doorbell events carry no woke argument (an engine's
	// wake shows as the end of its sleep, with wake_ns), so the column is
	// printed only for a trace whose doorbells say: a column of zeros
	// would read as "no doorbell woke an engine".
	woke := slices.ContainsFunc(s.Tracks, func(ts TrackSummary) bool { return ts.DoorbellsWoke > 0 })
	if woke {
		fmt.Fprintf(tw, "\ntrack\tevents\tdoorbells\twoke an engine\tinterrupts\n")
	} else {
		fmt.Fprintf(tw, "\ntrack\tevents\tdoorbells\tinterrupts\n")
	}
	quiet := 0
	for _, ts := range s.Tracks {
		if ts.Events == 0 {
			quiet++ // a device with many channels names a track for each; most stay empty
			continue
		}
		if woke {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", ts.Name, ts.Events, ts.Doorbells, ts.DoorbellsWoke, ts.Interrupts)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", ts.Name, ts.Events, ts.Doorbells, ts.Interrupts)
		}
	}
	if quiet > 0 {
		fmt.Fprintf(tw, "(%d tracks without events)\n", quiet)
	}

	fmt.Fprintf(tw, "\ncategory\tname\tcount\n")
	for _, c := range s.Counts {
		category := c.Category
		if category == "" {
			category = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", category, c.Name, c.Count)
	}
	return tw.Flush()
}
