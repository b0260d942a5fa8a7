package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"softgpu/stage9-chardev/abi"
)

// The JSON this file writes is the Chrome trace-event format's object form,
// which Perfetto's JSON importer and chrome://tracing read:
//
//	{"displayTimeUnit": "ns",
//	 "otherData": {"format": "softgpu-trace/1", "stage": ..., "events": N, "dropped": N, "clock": ...},
//	 "traceEvents": [ ...metadata naming the tracks..., ...events sorted by ts... ]}
//
// One process (pid 1) is the device. Its tracks ("threads") are:
//
//	tid 1+e     engine e: commands as complete events ("ph":"X"), stops
//	tid 10      the driver: its own events, such as interrupt handling
//	tid 100+c   channel c: doorbells and faults, as instant events ("ph":"i")
//
// ts and dur are microseconds with three decimals, so nanosecond precision
// survives; otherData.clock says so.

const (
	pid            = 1
	driverTrack    = 10
	channelTrack0  = 100
	engineTrack0   = 1
	formatVersion  = "softgpu-trace/1"
	clockStatement = "device cycles since Open; 1 cycle = 1 ns; ts and dur in microseconds"
)

// WriteJSON writes the buffer's events as trace-event JSON. stage names the
// stage that made them (the trace's process name). Call it only when no
// one is recording any more.
func (b *Buffer) WriteJSON(w io.Writer, stage string) error {
	events := b.Events()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"format\":%q,\"stage\":%q,\"events\":%d,\"dropped\":%d,\"clock\":%q},\n\"traceEvents\":[\n",
		formatVersion, stage, len(events), b.Dropped(), clockStatement)
	fmt.Fprintf(bw, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":%q}}", pid, "softgpu "+stage)
	track := func(tid int, name string) {
		fmt.Fprintf(bw, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%q}}", pid, tid, name)
		fmt.Fprintf(bw, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid, tid, tid)
	}
	for e := range abi.Engine(abi.NumEngines) {
		track(engineTrack0+int(e), "engine "+e.String())
	}
	track(driverTrack, "driver")
	for c := range abi.Channel(abi.NumChannels) {
		track(channelTrack0+int(c), c.String())
	}
	for _, ev := range events {
		bw.WriteString(",\n")
		writeEvent(bw, ev)
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// micros formats cycles (ns) as microseconds with three decimals.
func micros(cycles uint64) string { return fmt.Sprintf("%d.%03d", cycles/1000, cycles%1000) }

// writeEvent writes one event as one JSON object.
func writeEvent(w *bufio.Writer, ev Event) {
	engine := engineTrack0 + int(ev.Engine)
	channel := channelTrack0 + int(ev.Channel)
	instant := func(tid int, cat, name, args string) {
		fmt.Fprintf(w, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":%q,\"name\":%q,\"pid\":%d,\"tid\":%d,\"ts\":%s,\"args\":{%s}}",
			cat, name, pid, tid, micros(ev.Start), args)
	}
	switch ev.Kind {
	case KindCommand:
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"command\",\"name\":%q,\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"+
			"\"args\":{\"engine\":%q,\"channel\":%d,\"seq\":%d,\"size\":%d,\"status\":%q}}",
			ev.Op.String(), pid, engine, micros(ev.Start), micros(ev.End-ev.Start),
			ev.Engine.String(), ev.Channel, ev.Seq, ev.Size, abi.Status(ev.Status).String())
	case KindDoorbell:
		instant(channel, "doorbell", "doorbell", fmt.Sprintf("\"value\":%d", ev.Arg))
	case KindFault:
		instant(channel, "fault", "channel fault", fmt.Sprintf("\"fault\":%q,\"value\":%d", abi.ChannelFault(ev.Arg).String(), ev.Seq))
	case KindStop:
		instant(engine, "device", "stop", "")
	case KindIRQRaise:
		instant(engine, "irq", "irq raise", fmt.Sprintf("\"cause\":%d,\"channel\":%d", ev.Arg, ev.Channel))
	case KindIRQHandled:
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"irq\",\"name\":\"irq handled\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"args\":{\"cause\":%d}}",
			pid, driverTrack, micros(ev.Start), micros(ev.End-ev.Start), ev.Arg)
	case KindSleep:
		args := ""
		if ev.Arg <= ev.End-ev.Start { // woken by a wake call during the sleep
			args = fmt.Sprintf("\"wake_ns\":%d", ev.Arg)
		}
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"idle\",\"name\":\"sleep\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"args\":{%s}}",
			pid, engine, micros(ev.Start), micros(ev.End-ev.Start), args)
	case KindTLBMiss:
		instant(engine, "tlb", "tlb miss", fmt.Sprintf("\"va\":%d,\"fault\":%d", ev.Seq, ev.Arg))
	case KindTLBInvalidate:
		instant(engine, "tlb", "tlb invalidate", fmt.Sprintf("\"generation\":%d", ev.Arg))
	case KindPageFault:
		instant(engine, "fault", "page fault", fmt.Sprintf("\"va\":%d,\"fault\":%q", ev.Seq, abi.Fault(ev.Arg).String()))
	case KindPreempt:
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"command\",\"name\":%q,\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"+
			"\"args\":{\"engine\":%q,\"channel\":%d,\"seq\":%d,\"done\":%d,\"status\":\"preempted\"}}",
			ev.Op.String()+" (preempted)", pid, engine, micros(ev.Start), micros(ev.End-ev.Start),
			ev.Engine.String(), ev.Channel, ev.Seq, ev.Arg)
	case KindSwitch:
		instant(engine, "sched", "switch", fmt.Sprintf("\"to\":%d,\"from\":%d", ev.Channel, ev.Arg))
	case KindRunlist:
		instant(engine, "sched", "runlist", fmt.Sprintf("\"generation\":%d,\"error\":%q", ev.Arg, abi.RunlistError(ev.Status).String()))
	case KindStall:
		instant(engine, "fault", "stall", fmt.Sprintf("\"va\":%d,\"channel\":%d,\"dropped\":%d", ev.Seq, ev.Channel, ev.Arg))
	case KindReplay:
		instant(engine, "fault", "replay", fmt.Sprintf("\"generation\":%d", ev.Arg))
	case KindFaultBatch:
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"fault\",\"name\":\"fault batch\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"+
			"\"args\":{\"records\":%d,\"pages\":%d,\"migrated\":%d}}",
			pid, driverTrack, micros(ev.Start), micros(ev.End-ev.Start), ev.Arg, ev.Size, ev.Seq)
	case KindMigrate:
		to := "device"
		if ev.Status == 1 {
			to = "host"
		}
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"fault\",\"name\":%q,\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"args\":{\"pages\":%d}}",
			"migrate to "+to, pid, driverTrack, micros(ev.Start), micros(ev.End-ev.Start), ev.Arg)
	case KindAttach:
		instant(driverTrack, "client", "client attach", fmt.Sprintf("\"pid\":%d,\"context\":%d", ev.Arg, ev.Seq))
	case KindDetach:
		fmt.Fprintf(w, "{\"ph\":\"X\",\"cat\":\"client\",\"name\":\"client detach\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"+
			"\"args\":{\"pid\":%d,\"context\":%d}}",
			pid, driverTrack, micros(ev.Start), micros(ev.End-ev.Start), ev.Arg, ev.Seq)
	default:
		instant(driverTrack, "unknown", ev.Kind.String(), fmt.Sprintf("\"kind\":%d", ev.Kind))
	}
}

// WriteFile writes the buffer's events to path as WriteJSON does, through
// a temporary file in the same directory, so that a reader never sees half
// a trace.
func (b *Buffer) WriteFile(path, stage string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trace-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := b.WriteJSON(tmp, stage); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
