package abi

import "fmt"

// Virtual memory. Every address a command names is a virtual address (VA)
// in the address space of the command's context; the engines' MMU
// translates it, page by page, to a physical address (PA): an offset into
// device memory, or a bus address of pinned host memory (dma.go).
//
// A context is an address space with an id (the descriptor's context field,
// OffContext) and a page-table root. The driver keeps the contexts in a
// privileged page of the register space, one line each:
//
//	RegCtxRoot      device-memory PA of the context's root table, 0 = none
//	RegCtxFlags     CtxEnabled, CtxSticky
//	RegCtxFaultAck  the RegCtxFaults value the driver has seen and cleared
//
// and the device reports each context's faults in a read-only page, one line
// each:
//
//	RegCtxFaults     faults counted so far
//	RegCtxFaultVA    the VA of the last fault
//	RegCtxFaultInfo  its Fault (kind and access)
//	RegCtxResets     engine resets under a command of the context, counted
//	                 so far (stage 9)
//
// A sticky context — every context the driver makes for a user — stops at
// its first fault, as a GPU context does after an MMU fault: every later
// command of the context fails with StatusContextFaulted until the driver
// clears it (RegCtxFaultAck = RegCtxFaults). The driver's own context,
// context 0, is not sticky: a bad address fails that command alone.
//
// ANCHOR: pte
// The page tables. Four levels, each a table of 64-bit little-endian
// entries in device memory, 4 KiB aligned; the root (level 0) has 1024
// entries (8 KiB), the others 512:
//
//	VA bits  48..39   38..30   29..21   20..12   11..0
//	         level 0  level 1  level 2  level 3  offset
//
// so a context's address space is 2^49 bytes: enough for the driver's own
// context to map device memory and the whole bus range at the addresses they
// have physically (identity), as its tables do. An entry:
//
//	bit  0      valid
//	bit  1      writable
//	bits 2..3   kind: PTETable (points to the next level's table),
//	            or a page: PTEPage4K (level 3), PTEPage64K (level 3, the
//	            same entry in all 16 slots of a 64 KiB-aligned run),
//	            PTEPage2M (level 2), PTEPage1G (level 1)
//	bit  4      aperture: 0 device memory, 1 host (the PA is a bus address)
//	bit  5      zero
//	bit  6      accessed: set by an engine when it reads a 4 KiB leaf
//	            from the table (managed.go), cleared by the driver
//	bits 7..11  fragment, in a level-3 page entry (zero in every other):
//	            F says the page lies in an aligned block of 2^(12+F) bytes
//	            of VA, at most its table's 2 MiB (F ≤ MaxFragment), that
//	            maps an aligned block of as many contiguous physical bytes,
//	            every page of it with the same kind, permissions and
//	            aperture; 0 says nothing beyond the page itself
//	bits 12..63 the frame: PA >> 12 — the next table, or the page
//
// A walk that finds an entry of a kind its level does not allow, a frame not
// aligned to the page size, a table outside device memory, or a reserved bit
// set, has found a malformed entry: FaultMalformed. So has one whose
// fragment is larger than its table, smaller than its page, names a block
// whose physical start is not aligned to its size, or reaches past the
// memory of its aperture.
// ANCHOR_END: pte

// The bits and kinds of a page-table entry, and the shape of the tables:
// four levels under a 1024-entry root, covering 2^49 bytes of VA.
const (
	PTEValid    = 1 << 0
	PTEWritable = 1 << 1
	PTEHost     = 1 << 4

	pteKindShift = 2
	pteKindMask  = 3 << pteKindShift
	pteReserved  = 0x020 // bit 5 (bit 6 is PTEAccessed, managed.go)

	pteFragmentShift = 7
	PTEFragmentMask  = 0x1f << pteFragmentShift // bits 7..11
	// MaxFragment is the largest fragment a level-3 entry can hold: a
	// block as large as the 2 MiB its table maps.
	MaxFragment = 21 - PageShift

	PTETable   = 0 << pteKindShift
	PTEPage4K  = 1 << pteKindShift
	PTEPage64K = 2 << pteKindShift
	PTEPage2M  = 3 << pteKindShift
	// PTEPage1G is the same kind value as PTEPage2M: a page entry at
	// level 1 is a 1 GiB page, at level 2 a 2 MiB one.
	PTEPage1G = PTEPage2M

	PageShift  = 12
	VABits     = 49
	RootLevel  = 0
	LeafLevel  = 3
	RootSlots  = 1 << (VABits - 39) // 1024
	TableSlots = 512
	RootBytes  = RootSlots * 8
	TableBytes = TableSlots * 8
)

// PTE is a page-table entry.
type PTE uint64

// MakeTable returns a valid entry pointing at the table at device PA pa.
func MakeTable(pa uint64) PTE { return PTE(pa&^(1<<PageShift-1) | PTEValid | PTETable) }

// MakePage returns a valid page entry of the given kind for the page at PA
// pa, writable or not, on the host aperture or not.
func MakePage(pa uint64, kind uint64, writable, host bool) PTE {
	e := pa&^(1<<PageShift-1) | PTEValid | kind
	if writable {
		e |= PTEWritable
	}
	if host {
		e |= PTEHost
	}
	return PTE(e)
}

func (e PTE) Valid() bool    { return e&PTEValid != 0 }
func (e PTE) Writable() bool { return e&PTEWritable != 0 }
func (e PTE) Host() bool     { return e&PTEHost != 0 }
func (e PTE) Kind() uint64   { return uint64(e) & pteKindMask }
func (e PTE) Frame() uint64  { return uint64(e) &^ (1<<PageShift - 1) } // the PA, page-aligned
func (e PTE) Reserved() bool { return uint64(e)&pteReserved != 0 }

// Fragment returns the entry's fragment field F: the page belongs to an
// aligned, physically contiguous block of 2^(12+F) bytes (0: to none larger
// than itself).
func (e PTE) Fragment() uint { return uint(uint64(e)&PTEFragmentMask) >> pteFragmentShift }

// WithFragment returns e with its fragment field set to f (at most 31; the
// walk rejects more than MaxFragment).
func (e PTE) WithFragment(f uint) PTE {
	return e&^PTEFragmentMask | PTE(uint64(f)<<pteFragmentShift&PTEFragmentMask)
}

// LevelShift returns the VA shift of level l's index: 39, 30, 21, 12.
func LevelShift(level int) uint { return uint(39 - 9*level) }

// LevelIndex returns the index of va's entry in a level-l table.
func LevelIndex(va uint64, level int) uint64 {
	if level == RootLevel {
		return (va >> 39) & (RootSlots - 1)
	}
	return (va >> LevelShift(level)) & (TableSlots - 1)
}

// PageSize is the size of a page a leaf maps.
type PageSize uint64

const (
	Page4K  PageSize = 4 << 10
	Page64K PageSize = 64 << 10
	Page2M  PageSize = 2 << 20
	Page1G  PageSize = 1 << 30
)

func (p PageSize) String() string {
	switch p {
	case Page4K:
		return "4KiB"
	case Page64K:
		return "64KiB"
	case Page2M:
		return "2MiB"
	case Page1G:
		return "1GiB"
	}
	return fmt.Sprintf("pagesize(%d)", uint64(p))
}

// LeafSize returns the page size a valid page entry maps at level, and
// false if the entry's kind is not a page that level allows.
func LeafSize(e PTE, level int) (PageSize, bool) {
	switch {
	case level == 1 && e.Kind() == PTEPage1G:
		return Page1G, true
	case level == 2 && e.Kind() == PTEPage2M:
		return Page2M, true
	case level == 3 && e.Kind() == PTEPage4K:
		return Page4K, true
	case level == 3 && e.Kind() == PTEPage64K:
		return Page64K, true
	}
	return 0, false
}

// Context is a context id: the descriptor's context field.
type Context uint16

// MaxContexts is the number of contexts the device has.
const MaxContexts = 64

// Bits of RegCtxFlags.
const (
	CtxEnabled = 1 << 0
	CtxSticky  = 1 << 1
)

// ANCHOR: ctxregs

// The context registers: in the privileged contexts page, at
// ContextRegs(c), written by the driver; and in the read-only context status
// page, at ContextStatusRegs(c), written by the device. A line each.
const (
	RegCtxRoot     = 0x00
	RegCtxFlags    = 0x08
	RegCtxFaultAck = 0x10

	RegCtxFaults    = 0x00
	RegCtxFaultVA   = 0x08
	RegCtxFaultInfo = 0x10
	// RegCtxResets counts the watchdog's engine resets under a command of
	// the context: commands that never reached a preemption point
	// (device/watchdog.go). Each is a FaultHung too, counted in
	// RegCtxFaults; but RegCtxFaultInfo holds only the last fault, which
	// a command of the context still running on another engine may
	// overwrite, and a channel's own fault is cleared when it leaves its
	// runlist (device/handover.go). A counter of its own is neither: the
	// daemon judges a client by it (stage 9's server/hangbars.go).
	RegCtxResets = 0x18

	ContextRegStride = 0x40
)

// ANCHOR_END: ctxregs

// The pages: the contexts page and the context status page follow the
// engines' control pages.
const (
	ContextsPage      = WindowPage + RegPageSize + NumEngines*RegPageSize
	ContextStatusPage = ContextsPage + RegPageSize
)

// ContextRegs returns the offset of context c's line in the contexts page.
func ContextRegs(c Context) uint64 { return ContextsPage + uint64(c)*ContextRegStride }

// ContextStatusRegs returns the offset of context c's line in the context
// status page.
func ContextStatusRegs(c Context) uint64 { return ContextStatusPage + uint64(c)*ContextRegStride }

// Fault is what the MMU found wrong, in RegCtxFaultInfo: a kind in the low
// byte, the access in the next.
type Fault uint64

const (
	FaultUnmapped  Fault = 1 // no valid entry maps the VA (or the VA is outside the address space)
	FaultReadOnly  Fault = 2 // a write to a page mapped read-only
	FaultMalformed Fault = 3 // the walk found an entry it cannot follow
	FaultHung      Fault = 4 // not the MMU's: the watchdog (or a preempt timeout) stopped a command of the context (runlist.go); VA 0

	FaultWrite Fault = 1 << 8 // the access was a write
)

func (f Fault) String() string {
	kind := map[Fault]string{FaultUnmapped: "unmapped", FaultReadOnly: "read-only", FaultMalformed: "malformed entry", FaultHung: "hung", FaultNotResident: "not resident"}[f&0xff]
	if kind == "" {
		kind = fmt.Sprintf("fault(%d)", uint64(f&0xff))
	}
	if f&FaultWrite != 0 {
		return kind + " (write)"
	}
	return kind + " (read)"
}

// ANCHOR: invalregs

// TLB invalidation. The driver asks every engine to drop what its TLB holds
// of a range of one context's address space: it writes the request into
// three privileged registers, then increments RegInvalGen. A busy engine,
// at every safe point (where it holds no translation: the start of a
// command and between its steps), compares RegInvalGen with the generation
// it last handled; if it moved, it drops the entries and stores the
// generation into its RegInvalAck (engine status page). The driver waits
// until every engine has acknowledged, or is idle, asleep or stopped. Such
// an engine is not asked, and answers nothing from its idle loop: when it
// leaves idle, before its first translation, it compares the generation
// and drops its whole TLB if it moved, so it cannot use a stale entry
// (device/idle.go's leaveIdle and device/mmu.go argue why).
const (
	RegInvalCtx  = ControlPage + 0x0c0 // the context whose entries go
	RegInvalVA   = ControlPage + 0x0c8 // the range: first VA
	RegInvalSize = ControlPage + 0x0d0 // and size; 0 means the whole address space
	RegInvalGen  = ControlPage + 0x100 // stored last: the request's generation

	// In each engine's counters page, addressed from its status page
	// (counters.go):
	RegInvalAck     = CountersOffset + 0x0c0 // the last generation the engine has handled
	RegTLBHits      = CountersOffset + 0x100 // translations its TLB answered
	RegTLBMisses    = CountersOffset + 0x108 // translations that walked the tables
	RegTLBWalkReads = CountersOffset + 0x110 // table entries those walks read
)

// ANCHOR_END: invalregs
