package server

import (
	"fmt"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// info fills INFO: the device as softgpu-smi shows it, read from the
// device's registers and the driver's counters.
func (s *Server) info(a *uapi.Info) {
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

// clientInfo fills CLIENT_INFO for the Index-th connected client.
func (s *Server) clientInfo(a *uapi.ClientInfo) error {
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
	return nil
}
