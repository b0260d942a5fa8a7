package server

import (
	"fmt"
	"os"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// seesAll reports whether c may see the device's activity and every
// client's counters: it is root, or the daemon's own user (softgpu-smi
// run by whoever runs the daemon). Anyone else sees the device's
// configuration and state, as the public pages show them, and the
// counters of its own user's clients: the engines' command and sleep
// counts, the interrupts, faults and migrations, the memory in use and
// another client's calls and bytes each move with other clients' work,
// which the public pages were emptied of for that reason
// (TestAStrangerSeesNoOtherUsersCountersThroughTheControlCalls).
func (c *client) seesAll() bool { return c.uid == 0 || c.uid == uint32(os.Geteuid()) }

// info fills INFO: the device as softgpu-smi shows it, read from the
// device's registers and the driver's counters — for a caller that may
// not see them all (seesAll), the device's size and its engines' idle
// modes and states, and Withheld.
func (s *Server) info(a *uapi.Info, all bool) {
	if !all {
		regs := s.dev.Registers()
		*a = uapi.Info{MemoryTotal: s.drv.MemorySize(), Withheld: 1}
		for e := range abi.Engine(abi.NumEngines) {
			status, control := abi.EngineStatusPage(e), abi.EngineControlPage(e)
			a.Engines[e] = uapi.EngineInfo{IdleMode: uint32(regs.Load(control + abi.RegIdleMode)), State: uint32(regs.Load(status + abi.RegEngineState))}
		}
		return
	}
	regs := s.dev.Registers()
	ms := s.drv.ManagedStats()
	s.mu.Lock()
	clients := len(s.clients)
	s.mu.Unlock()
	*a = uapi.Info{MemoryTotal: s.drv.MemorySize(), MemoryUsed: s.drv.MemoryInUse(), Clients: uint32(clients),
		Messages: s.messages.Load(), Interrupts: s.drv.Stats().IRQs, Faults: ms.Faults, Migrations: ms.ToDevice + ms.ToHost}
	for e := range abi.Engine(abi.NumEngines) {
		status, control := abi.EngineStatusPage(e), abi.EngineControlPage(e)
		a.Engines[e] = uapi.EngineInfo{
			Commands: regs.Load(status + abi.RegCommands),
			Asleep:   regs.Load(status + abi.RegSleptCycles),
			IdleMode: uint32(regs.Load(control + abi.RegIdleMode)),
			State:    uint32(regs.Load(status + abi.RegEngineState)),
			Sleeps:   regs.Load(status + abi.RegSleeps),
			Channels: uint32(regs.Load(control + abi.RegRunlistLen)),
		}
	}
}

// clientAt is the index-th connected client, for the calls that walk the
// client list one index at a time (CLIENT_INFO, CLIENT_QUOTA).
func (s *Server) clientAt(index uint32) (*client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(index) >= len(s.clients) {
		return nil, fmt.Errorf("client %d of %d: %w", index, len(s.clients), uapi.ErrNoEntry)
	}
	return s.clients[index], nil
}

// clientInfo fills CLIENT_INFO for the Index-th connected client, as
// viewer may see it: another user's client's counters are withheld
// from a viewer that may not see them all (seesAll).
func (s *Server) clientInfo(a *uapi.ClientInfo, viewer *client) error {
	c, err := s.clientAt(a.Index)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	*a = uapi.ClientInfo{Index: a.Index, Pid: c.pid, Uid: c.uid, Channels: uint32(len(c.chans)),
		DeviceMemory: c.devMem, HostMemory: c.hostMem, Calls: c.calls.Load()}
	if c.ctx != nil { // written under c.mu by attach
		a.Context = uint32(c.ctx.ID())
	}
	if withheld(viewer, c) {
		a.Channels, a.DeviceMemory, a.HostMemory, a.Calls, a.Withheld = 0, 0, 0, 0, 1
	}
	return nil
}

// withheld reports whether viewer may not see c's counters: c is
// another user's, and viewer may not see them all.
func withheld(viewer, c *client) bool { return c.uid != viewer.uid && !viewer.seesAll() }
