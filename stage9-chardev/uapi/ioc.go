package uapi

import "fmt"

// Request numbers. A request number is a Linux ioctl number, laid out
// exactly as asm-generic/ioctl.h lays out _IOC:
//
//	bits 31..30  dir   IocNone, IocWrite, IocRead, or IocRead|IocWrite
//	bits 29..16  size  bytes of the call's argument struct (14 bits)
//	bits 15..8   type  the driver's letter: Magic, 'G'
//	bits  7..0   nr    which call of the driver
//
// dir is seen from the client: IocWrite means the client writes the
// argument to the device (the call carries it), IocRead that it reads one
// back (the reply carries it). The number alone therefore says how long
// both messages of a call are, and a struct that grows changes its
// request number: an old client's request is then simply unknown, never
// misread.

// The directions, as Linux's _IOC_NONE, _IOC_WRITE and _IOC_READ.
const (
	IocNone  = 0
	IocWrite = 1
	IocRead  = 2
)

// The width and position of each part of a request number, as Linux's
// _IOC_*BITS and _IOC_*SHIFT.
const (
	IocNrBits   = 8
	IocTypeBits = 8
	IocSizeBits = 14
	IocDirBits  = 2

	IocNrShift   = 0
	IocTypeShift = IocNrShift + IocNrBits
	IocSizeShift = IocTypeShift + IocTypeBits
	IocDirShift  = IocSizeShift + IocSizeBits
)

// Magic is the type byte of every softgpu request: 'G'. A request with
// another type byte is not softgpu's (ErrBadRequest).
const Magic = 'G'

// IOC builds a request number from its four parts, as Linux's _IOC. It
// panics if a part does not fit its bits: request numbers are written in
// this package's source, so a part that overflows is a bug here, not a
// client's mistake.
func IOC(dir, typ, nr, size uint32) uint32 {
	if dir >= 1<<IocDirBits || typ >= 1<<IocTypeBits || nr >= 1<<IocNrBits || size >= 1<<IocSizeBits {
		panic(fmt.Sprintf("uapi: IOC(dir %d, type %#x, nr %#x, size %d): a part overflows its bits", dir, typ, nr, size))
	}
	return dir<<IocDirShift | size<<IocSizeShift | typ<<IocTypeShift | nr<<IocNrShift
}

// IO returns softgpu's request number nr for a call with no argument, as
// Linux's _IO(Magic, nr).
func IO(nr uint32) uint32 { return IOC(IocNone, Magic, nr, 0) }

// IOR returns softgpu's request number nr for a call whose reply carries
// a size-byte argument, as Linux's _IOR(Magic, nr, type).
func IOR(nr, size uint32) uint32 { return IOC(IocRead, Magic, nr, size) }

// IOW returns softgpu's request number nr for a call that carries a
// size-byte argument to the daemon, as Linux's _IOW(Magic, nr, type).
func IOW(nr, size uint32) uint32 { return IOC(IocWrite, Magic, nr, size) }

// IOWR returns softgpu's request number nr for a call that carries a
// size-byte argument and gets it back filled in, as Linux's
// _IOWR(Magic, nr, type).
func IOWR(nr, size uint32) uint32 { return IOC(IocRead|IocWrite, Magic, nr, size) }

// Dir returns the direction bits of request number req (_IOC_DIR).
func Dir(req uint32) uint32 { return req >> IocDirShift & (1<<IocDirBits - 1) }

// Type returns the type byte of request number req (_IOC_TYPE).
func Type(req uint32) uint32 { return req >> IocTypeShift & (1<<IocTypeBits - 1) }

// Nr returns the call number of request number req (_IOC_NR).
func Nr(req uint32) uint32 { return req >> IocNrShift & (1<<IocNrBits - 1) }

// Size returns the argument size of request number req (_IOC_SIZE).
func Size(req uint32) uint32 { return req >> IocSizeShift & (1<<IocSizeBits - 1) }
