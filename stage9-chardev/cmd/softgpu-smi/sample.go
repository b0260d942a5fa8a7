package main

import (
	"fmt"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// This file takes samples of the daemon and turns two of them into a
// report. A sample is what the daemon's counters read at one moment:
// INFO and every CLIENT_INFO and CLIENT_QUOTA, made on one control
// connection. The counters
// only grow, so a rate is the difference between two samples divided by
// the time between them; a report is always made from two:
//
//	sample(t0) ──┐
//	             ├─► report: totals from t1, rates over t1 - t0
//	sample(t1) ──┘
//
// Invariant: prev.at is before cur.at, on the same daemon. A counter that
// reads lower in cur than in prev (a daemon restarted on the node between
// them) gives a rate of zero, not a negative one.

// sample is one look at the daemon.
type sample struct {
	at      time.Time
	node    string
	version uapi.Version
	info    uapi.Info
	clients []uapi.ClientInfo  // every connection, this tool's own included
	quotas  []uapi.ClientQuota // likewise (quota.go)
}

// take reads the daemon's counters on ctl.
func take(ctl *client.Control, node string) (sample, error) {
	s := sample{node: node, version: ctl.Version()}
	var err error
	// The clients first: the daemon frees a client's memory before it
	// drops the client from the list, so a client missing here has given
	// its memory back by the INFO below, and the device's used memory
	// never counts a client the report no longer shows.
	if s.clients, err = ctl.Clients(); err != nil {
		return sample{}, fmt.Errorf("CLIENT_INFO: %w", err)
	}
	if err := s.takeQuotas(ctl.Quotas); err != nil {
		return sample{}, err
	}
	if s.info, err = ctl.Info(); err != nil {
		return sample{}, fmt.Errorf("INFO: %w", err)
	}
	s.at = time.Now()
	return s, nil
}

// report is what softgpu-smi prints, as text or as JSON. Its JSON names
// are the interface scripts read: they may gain fields, never change.
type report struct {
	Time       time.Time      `json:"time"`
	Interval   float64        `json:"interval_seconds"` // between the two samples the rates come from
	Device     deviceReport   `json:"device"`
	Memory     memoryReport   `json:"memory"`
	Messages   uint64         `json:"messages"`
	Interrupts uint64         `json:"interrupts"`
	Faults     uint64         `json:"faults"`
	Migrations uint64         `json:"migrations"`
	Engines    []engineReport `json:"engines"`
	Clients    []clientReport `json:"clients"`
	// Withheld: the daemon showed this tool's user only the device's
	// configuration and state (uapi 2.3: neither root nor the daemon's
	// user); the activity counters read 0.
	Withheld bool `json:"withheld,omitempty"`
}

type deviceReport struct {
	Node        string `json:"node"`
	UAPIVersion string `json:"uapi_version"` // major.minor.patch
	NumEngines  uint32 `json:"num_engines"`
	NumChannels uint32 `json:"num_channels"`
	RingSize    uint32 `json:"ring_size"`
	Connections uint32 `json:"connections"` // every client of the node, this tool's own included
}

type memoryReport struct {
	Total uint64 `json:"total_bytes"`
	Used  uint64 `json:"used_bytes"`
}

type engineReport struct {
	Engine            string  `json:"engine"`
	IdleMode          string  `json:"idle_mode"`
	State             string  `json:"state"`
	Commands          uint64  `json:"commands"`
	CommandsPerSecond float64 `json:"commands_per_second"`
	AsleepPercent     float64 `json:"asleep_percent"`
	Sleeps            uint64  `json:"sleeps"`
	Channels          uint32  `json:"channels"`
}

type clientReport struct {
	Pid          uint32       `json:"pid"`
	Uid          uint32       `json:"uid"`
	Context      uint32       `json:"context"`
	Channels     uint32       `json:"channels"`
	DeviceMemory uint64       `json:"device_memory_bytes"`
	HostMemory   uint64       `json:"host_memory_bytes"`
	Calls        uint64       `json:"calls"`
	Quota        *quotaReport `json:"quota,omitempty"`    // its use against its quotas; absent for a client that came between CLIENT_INFO and CLIENT_QUOTA
	Withheld     bool         `json:"withheld,omitempty"` // another user's client: its counters and use read 0 (uapi 2.3)
}

// newReport makes the report of cur, with rates since prev.
func newReport(prev, cur sample) report {
	interval := cur.at.Sub(prev.at)
	v := cur.version
	r := report{
		Time:     cur.at,
		Interval: interval.Seconds(),
		Device: deviceReport{Node: cur.node, UAPIVersion: fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch),
			NumEngines: v.NumEngines, NumChannels: v.NumChannels, RingSize: v.RingSize, Connections: cur.info.Clients},
		Memory:     memoryReport{Total: cur.info.MemoryTotal, Used: cur.info.MemoryUsed},
		Messages:   cur.info.Messages,
		Interrupts: cur.info.Interrupts,
		Faults:     cur.info.Faults,
		Migrations: cur.info.Migrations,
		Engines:    []engineReport{},
		Clients:    []clientReport{},
		Withheld:   cur.info.Withheld != 0,
	}
	for e := range abi.Engine(uapi.InfoEngines) {
		before, now := prev.info.Engines[e], cur.info.Engines[e]
		r.Engines = append(r.Engines, engineReport{
			Engine:            e.String(),
			IdleMode:          abi.IdleMode(now.IdleMode).String(),
			State:             stateName(now.State),
			Commands:          now.Commands,
			CommandsPerSecond: perSecond(now.Commands, before.Commands, interval),
			AsleepPercent:     asleepPercent(before, now, interval),
			Sleeps:            now.Sleeps,
			Channels:          now.Channels,
		})
	}
	// Only clients that have attached use the device; a connection
	// without a context is a tool like this one, counted in Connections.
	for _, c := range cur.clients {
		if c.Context == 0 {
			continue
		}
		r.Clients = append(r.Clients, clientReport{Pid: c.Pid, Uid: c.Uid, Context: c.Context, Channels: c.Channels,
			DeviceMemory: c.DeviceMemory, HostMemory: c.HostMemory, Calls: c.Calls, Quota: cur.quotaOf(c.Pid, c.Context),
			Withheld: c.Withheld != 0})
	}
	return r
}

// perSecond is the rate of a counter that went from before to now.
func perSecond(now, before uint64, interval time.Duration) float64 {
	if now < before || interval <= 0 {
		return 0
	}
	return float64(now-before) / interval.Seconds()
}

// asleepPercent is the share of the interval the engine slept.
//
// The engine adds a sleep's length to its counter when it wakes, so the
// counter misses the sleep under way at each end of the interval. One
// case is worth mending: an engine asleep at both samples that has not
// gone to sleep again in between slept through the whole interval, though
// its counter did not move. Otherwise the share is a lower bound.
func asleepPercent(before, now uapi.EngineInfo, interval time.Duration) float64 {
	if interval <= 0 {
		return 0
	}
	if before.State == abi.EngineAsleep && now.State == abi.EngineAsleep && before.Sleeps == now.Sleeps {
		return 100
	}
	if now.Asleep < before.Asleep {
		return 0
	}
	// The device clock counts 1 cycle per ns (abi/idle.go).
	return min(100, 100*float64(now.Asleep-before.Asleep)/float64(interval.Nanoseconds()))
}

// stateName names a value of RegEngineState.
func stateName(state uint32) string {
	switch state {
	case abi.EngineRunning:
		return "running"
	case abi.EngineStopped:
		return "stopped"
	case abi.EngineAsleep:
		return "asleep"
	case abi.EngineIdle:
		return "idle"
	}
	return fmt.Sprintf("state(%d)", state)
}
