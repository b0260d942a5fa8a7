package abi

import "encoding/binary"

// Managed memory: pages that move between the host and the device, and the
// replayable faults that move them.
//
// A managed page that lives on the host has, in its context's tables, a
// leaf entry that is not valid but carries PTEManaged: "this VA is
// managed; its page is elsewhere". An engine whose translation ends at such
// an entry does not fail the command. It writes a fault record into the
// fault buffer, raises IrqCauseFault, and stalls the channel: the command
// is saved in the channel's state block at its cursor (exactly as a
// preemption saves it, runlist.go), marked StateFaulted, and the channel is
// not served until the driver replays. Every other channel goes on. The
// driver's fault handler reads the records, migrates the pages, writes
// valid entries, and stores RegFaultReplay; each engine then serves its
// stalled channels again, and each resumes where it stopped. A leaf with
// neither bit is unmapped, as before: the command fails with a fault
// status (FaultUnmapped).
//
// The fault buffer is a ring of FaultRecordSize-byte records in device
// memory, at RegFaultBufBase, RegFaultBufSize records long (a power of
// two). The device writes a record at RegFaultPut mod size and then stores
// RegFaultPut+1; the driver reads records up to RegFaultPut and stores
// RegFaultGet past them. Both are free-running counts. When the ring is
// full the device drops the record and counts it in RegFaultOverflow — the
// channel still stalls, so the driver, which replays everything, loses
// nothing: the channel faults again and records it then. (NVIDIA's GPUs
// keep the same GET/PUT pair and overflow bit; a replay is how the driver
// asks the stalled accesses to try again.)
//
//	driver (handler)                          engine (a replayable fault)
//	                                          write the record at put
//	                                          store put+1 → RegFaultPut
//	                                          set IrqCauseFault
//	load RegFaultPut; read records up to it
//	store RegFaultGet
//	migrate pages, store valid PTEs
//	store gen+1 → RegFaultReplay              load RegFaultReplay: moved?
//	load RegNeedWakeup, RegStalled:             serve every stalled channel,
//	  both 1? → Wake                            then store 0 → RegStalled
//
// The replay is the doorbell of the need-wakeup handshake (idle.go) for a
// stalled channel: an engine about to sleep stores RegNeedWakeup = 1 and
// then loads RegFaultReplay among its checks for work, so either it sees
// the new generation or the driver sees the flag and wakes it. A spinning engine
// sees it at its next poll and pays no wake-up.
//
// It is a doorbell only for engines that have a channel stalled: as on a
// real GPU, where a replay restarts the accesses that faulted and an
// engine with none has nothing to do, an asleep engine with no stalled
// channel is not woken (waking it would cost a wake-up and then its idle
// spin, on the cores of the host whose fault is being served). The engine
// stores RegStalled = 1 before it writes the record of a fault that
// stalls a channel — before RegFaultPut, which the driver loads before it
// replays — so the driver's load of RegStalled, after its store of the
// generation, sees 1 unless the engine has since served a newer replay
// itself, resuming that channel: then the engine stored the 0, after it
// loaded the new generation. RegStalled is conservative: an engine whose
// stalled channel leaves the runlist keeps it at 1 until its next replay,
// which then wakes it for nothing.

// PTEManaged marks an entry that is not valid (PTEValid clear) as a managed
// page not resident on the device: an access to it is a replayable fault.
const PTEManaged = 1 << 5

// ManagedPTE is the leaf entry of a managed page that is not on the device.
const ManagedPTE PTE = PTEManaged

// PTEAccessed, in a valid 4 KiB leaf entry, says an engine has used the
// page since the driver last cleared the bit. An engine sets it as real
// MMUs do, when it reads the entry from the table — a walk that fills a
// TLB entry, or the run of entries a translation reads past it — and not
// on a TLB hit; with a compare-and-swap from the entry it read, so it
// never lands on an entry the driver has changed meanwhile. The driver
// clears it the same way, and reads it to choose what to evict
// (driver/evict.go). The bit is a hint: a page used only through a TLB
// entry made before the bit was cleared looks unused.
const PTEAccessed = 1 << 6

// Accessed reports whether e has PTEAccessed set.
func (e PTE) Accessed() bool { return e&PTEAccessed != 0 }

// NotResident reports whether e is a managed page's entry while it is not
// resident: not valid, and exactly the marker.
func (e PTE) NotResident() bool { return e == ManagedPTE }

// FaultNotResident is a Fault kind: the VA is a managed page that is not on
// the device. It appears in fault records, and, if the channel has no state
// block to stall in, in RegCtxFaultInfo as the command's failure.
const FaultNotResident Fault = 5

// Fault buffer registers, driver-written, in the control page.
const (
	RegFaultBufBase = ControlPage + 0x140 // device PA of the ring; 0: replayable faults off
	RegFaultBufSize = ControlPage + 0x148 // records in the ring, a power of two
	// RegFaultBurst is how far past a fault an engine looks for more
	// (device/burst.go), in bytes of the faulting operand's range, at most
	// MaxFaultBurst; 0: one record per fault.
	RegFaultBurst  = ControlPage + 0x150
	RegFaultGet    = ControlPage + 0x180 // the driver's read count; its own line
	RegFaultReplay = ControlPage + 0x1c0 // the replay generation; its own line, which engines poll
	// RegFaultNeedIrq is 1 while the driver's handler is not polling the
	// buffer: a device that writes a record raises IrqCauseFault only
	// then. It is the engines' need-wakeup flag turned round (NAPI does the
	// same for network interrupts): the device stores RegFaultPut and then
	// loads this; the driver stores 1 here and then loads RegFaultPut once
	// more before it blocks, so one of them sees the other's store.
	RegFaultNeedIrq = ControlPage + 0x200
)

// Fault buffer registers, device-written, in the global counters page
// (counters.go: every client maps the global page, and the pointers tell
// when another's memory faults). One line: the engines write it under the
// device's fault lock, and the driver reads it.
const (
	RegFaultPut      = GlobalCountersPage + 0x0c0 // records written, ever
	RegFaultOverflow = GlobalCountersPage + 0x0c8 // records dropped because the ring was full
)

// MaxFaultBuf is the most records the ring may hold.
const MaxFaultBuf = 1 << 16

// MaxFaultBurst is the widest burst RegFaultBurst may ask for: 4 MiB.
const MaxFaultBurst = 4 << 20

// FaultWarpBytes is how much of an operand one warp of a command touches
// in a fault burst: each 1 KiB piece of a page the burst covers is one
// record, so a page the command covers whole is recorded four times.
const FaultWarpBytes = 1 << 10

// IrqCauseFault is the interrupt cause for a fault record: the driver's
// fault handler should read the buffer.
const IrqCauseFault = 1 << 3

// StateFaulted, with StateSaved, marks a state block whose command stalled
// on a replayable fault rather than being preempted.
const StateFaulted = 2

// FaultRecordSize is the size of one fault record.
const FaultRecordSize = 32

// A fault record's layout, little-endian:
//
//	0x00  VA         the faulting address
//	0x08  Timestamp  the device clock when the engine stalled
//	0x10  Channel    u16
//	0x12  Context    u16
//	0x14  Engine     u8
//	0x15  Access     u8: 0 read, 1 write
//	0x16  reserved   10 bytes, zero
type FaultRecord struct {
	VA        uint64
	Timestamp uint64
	Channel   Channel
	Context   Context
	Engine    Engine
	Write     bool
}

// Encode writes r into b, which must be FaultRecordSize bytes or more.
func (r FaultRecord) Encode(b []byte) {
	b = b[:FaultRecordSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[0x00:], r.VA)
	binary.LittleEndian.PutUint64(b[0x08:], r.Timestamp)
	binary.LittleEndian.PutUint16(b[0x10:], uint16(r.Channel))
	binary.LittleEndian.PutUint16(b[0x12:], uint16(r.Context))
	b[0x14] = byte(r.Engine)
	if r.Write {
		b[0x15] = 1
	}
}

// DecodeFaultRecord reads a record, and reports whether it is well formed:
// a channel, context and engine the device has, an access of 0 or 1,
// reserved bytes zero. The driver checks, because the buffer is memory.
func DecodeFaultRecord(b []byte) (FaultRecord, bool) {
	b = b[:FaultRecordSize]
	r := FaultRecord{
		VA:        binary.LittleEndian.Uint64(b[0x00:]),
		Timestamp: binary.LittleEndian.Uint64(b[0x08:]),
		Channel:   Channel(binary.LittleEndian.Uint16(b[0x10:])),
		Context:   Context(binary.LittleEndian.Uint16(b[0x12:])),
		Engine:    Engine(b[0x14]),
		Write:     b[0x15] == 1,
	}
	ok := r.Channel.Valid() && r.Context < MaxContexts && r.Engine < NumEngines && b[0x15] <= 1
	for _, x := range b[0x16:] {
		ok = ok && x == 0
	}
	return r, ok
}
