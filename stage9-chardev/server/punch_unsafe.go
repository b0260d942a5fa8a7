package server

import (
	"unsafe"
)

// clockOf is the punch clock at the start of page, a page mapped shared
// with a punch helper (punch.go): page-aligned, so its words are aligned
// for atomic access.
func clockOf(page []byte) *punchClock {
	return (*punchClock)(unsafe.Pointer(&page[0]))
}
