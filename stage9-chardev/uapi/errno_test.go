package uapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestErrnoNumbers pins every errno: the numbers are what a C client
// compares against, so renumbering one must fail a test.
func TestErrnoNumbers(t *testing.T) {
	tests := []struct {
		errno Errno
		want  uint32
		text  string
	}{
		{OK, 0, "ok"},
		{ErrBadRequest, 1, "bad request number"},
		{ErrSize, 2, "wrong message size"},
		{ErrFDs, 3, "wrong number of file descriptors"},
		{ErrInval, 4, "invalid argument"},
		{ErrNotNegotiated, 5, "VERSION not called yet"},
		{ErrVersion, 6, "major version mismatch"},
		{ErrNoMemory, 7, "out of device memory"},
		{ErrNoChannel, 8, "no channel free"},
		{ErrNoEntry, 9, "no such object"},
		{ErrPerm, 10, "not permitted"},
		{ErrGone, 11, "device gone"},
		{ErrBusy, 12, "busy"},
		{ErrFault, 13, "faulted"},
		{ErrQuota, 14, "over quota"},
	}
	assert.Equal(t, len(errnoText), len(tests), "%d errnos pinned; errnoText has %d", len(tests), len(errnoText))
	for _, tt := range tests {
		assert.Equal(t, tt.want, uint32(tt.errno), "%s", tt.text)
		assert.Equal(t, "softgpu: "+tt.text, tt.errno.Error(), "Errno(%d).Error()", tt.want)
	}
	assert.Equal(t, "softgpu: errno(99)", Errno(99).Error(), "Errno(99).Error()")
}

// TestErrnoIs: a wrapped Errno is found by errors.Is, and only its own.
func TestErrnoIs(t *testing.T) {
	err := fmt.Errorf("alloc 1 GiB: %w", ErrNoMemory)
	assert.ErrorIs(t, err, ErrNoMemory, "errors.Is(%v, ErrNoMemory) = false", err)
	if errors.Is(err, ErrNoEntry) {
		t.Errorf("errors.Is(%v, ErrNoEntry) = true", err)
	}
	var e Errno
	if !errors.As(err, &e) || e != ErrNoMemory {
		t.Errorf("errors.As(%v) = %v; want ErrNoMemory", err, e)
	}
}

func TestErrnoOf(t *testing.T) {
	tests := []struct {
		err  error
		want Errno
	}{
		{nil, OK},
		{ErrBusy, ErrBusy},
		{fmt.Errorf("close channel 3: %w", ErrBusy), ErrBusy},
		{errors.New("not an errno"), ErrInval},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ErrnoOf(tt.err), "ErrnoOf(%v)", tt.err)
	}
}
