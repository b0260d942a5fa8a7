package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// writeText prints the report of cur, with rates since prev, for a person:
//
//	softgpu  uapi 2.0.0  node /run/user/1000/softgpu/card0
//	memory 1.0 MiB / 16.0 MiB used  interrupts 3  faults 0  migrations 0  messages 9  connections 2
//
//	ENGINE   IDLE    STATE    CMDS/S  ASLEEP  SLEEPS  CHANNELS
//	compute  hybrid  asleep   0.0     100%    2       1
//	...
//
//	PID    UID   CONTEXT  CHANNELS  DEVICE MEM  HOST MEM  CALLS
//	4242   1000  1        2         1.0 MiB     64.0 KiB  9
//
//	QUOTA  … (quota.go)
func writeText(w io.Writer, prev, cur sample) error {
	r := newReport(prev, cur)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "softgpu  uapi %s  node %s\n", r.Device.UAPIVersion, r.Device.Node)
	if r.Withheld {
		fmt.Fprintf(tw, "memory %s  (the device's activity and other users' clients are shown only to root and the daemon's user)\n\n", byteSize(r.Memory.Total))
	} else {
		fmt.Fprintf(tw, "memory %s / %s used  interrupts %d  faults %d  migrations %d  messages %d  connections %d\n\n",
			byteSize(r.Memory.Used), byteSize(r.Memory.Total), r.Interrupts, r.Faults, r.Migrations, r.Messages, r.Device.Connections)
	}
	fmt.Fprintf(tw, "ENGINE\tIDLE\tSTATE\tCMDS/S\tASLEEP\tSLEEPS\tCHANNELS\n")
	for _, e := range r.Engines {
		if r.Withheld {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\n", e.Engine, e.IdleMode, e.State)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.0f%%\t%d\t%d\n",
			e.Engine, e.IdleMode, e.State, e.CommandsPerSecond, e.AsleepPercent, e.Sleeps, e.Channels)
	}
	fmt.Fprintln(tw)
	if len(r.Clients) == 0 {
		fmt.Fprintln(tw, "no clients attached")
		return tw.Flush()
	}
	fmt.Fprintf(tw, "PID\tUID\tCONTEXT\tCHANNELS\tDEVICE MEM\tHOST MEM\tCALLS\n")
	for _, c := range r.Clients {
		if c.Withheld {
			fmt.Fprintf(tw, "%d\t%d\t%d\t-\t-\t-\t-\n", c.Pid, c.Uid, c.Context)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%d\n",
			c.Pid, c.Uid, c.Context, c.Channels, byteSize(c.DeviceMemory), byteSize(c.HostMemory), c.Calls)
	}
	writeQuotas(tw, r.Clients)
	return tw.Flush()
}

// writeJSON prints the same report as one JSON object on one line, for a
// script: the numbers are exact, not rounded as writeText rounds them.
func writeJSON(w io.Writer, prev, cur sample) error {
	return json.NewEncoder(w).Encode(newReport(prev, cur))
}

// byteSize writes n in the largest binary unit it fills, to one decimal.
func byteSize(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	value, unit := float64(n)/1024, 0
	for value >= 1024 && unit < len(units)-1 {
		value /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", value, units[unit])
}
