package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCommandLayout pins every field's offset: a command with a distinct
// value in each field must put those bytes exactly where the layout says.
func TestCommandLayout(t *testing.T) {
	c := Command{Op: OpCopy, Flags: 0x5a, Ctx: 0x1234, Seq: 0x1111111111111111, Src: 0x2222222222222222,
		Dst: 0x3333333333333333, Size: 0x4444444444444444, Value: 0x5555555555555555,
		Fence: 0x6666666666666666}
	b := make([]byte, CommandSize)
	for i := range b {
		b[i] = 0xee // stale bytes that Encode must overwrite
	}
	c.Encode(b)
	if b[OffOpcode] != byte(OpCopy) || b[OffFlags] != 0x5a {
		t.Errorf("opcode, flags = %#x, %#x; want %#x, 0x5a", b[OffOpcode], b[OffFlags], byte(OpCopy))
	}
	words := []struct {
		name string
		off  int
		want uint64
	}{
		{"Seq", OffSeq, c.Seq},
		{"Src", OffSrc, c.Src},
		{"Dst", OffDst, c.Dst},
		{"Size", OffSize, c.Size},
		{"Value", OffValue, c.Value},
		{"Fence", OffFence, c.Fence},
	}
	for _, w := range words {
		assert.Equal(t, w.want, binary.LittleEndian.Uint64(b[w.off:]), "%s at offset %d", w.name, w.off)
	}
	assert.Equal(t, uint16(c.Ctx), binary.LittleEndian.Uint16(b[OffContext:]), "context at offset %d; want %#x", OffContext, c.Ctx)
	for _, r := range [][2]int{{OffContext + 2, OffSeq}, {OffFence + 8, CommandSize}} {
		for i := r[0]; i < r[1]; i++ {
			assert.Equal(t, byte(0), b[i], "reserved byte %d", i)
		}
	}
}

func TestCommandSizeIsOneCacheLine(t *testing.T) {
	if CommandSize != 64 {
		t.Fatalf("CommandSize = %d; want 64", CommandSize)
	}
	if OffFence+8 > CommandSize {
		t.Fatalf("last field ends at %d, past the %d-byte descriptor", OffFence+8, CommandSize)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	tests := []Command{
		{},
		{Op: OpNop, Seq: 1},
		{Op: OpFill, Dst: 4096, Size: 64, Value: 0xab},
		{Op: OpCopy, Src: 1 << 40, Dst: 1<<64 - 1, Size: 1<<64 - 1},
		{Op: OpDelay, Flags: 0xff, Value: 50_000},
		{Op: OpSum32, Seq: 1<<64 - 1, Src: 8, Dst: 16, Size: 4},
		{Op: OpAdd32, Dst: 256, Size: 1024, Value: 0xffffffff},
		{Op: OpNop, Flags: FlagFence | FlagInterrupt, Fence: 1<<64 - 1},
		{Op: OpFill, Ctx: MaxContexts - 1, Dst: 1 << 40, Size: 4096},
	}
	for _, c := range tests {
		b := make([]byte, CommandSize)
		c.Encode(b)
		assert.Equal(t, c, Decode(b), "Decode(Encode(%+v))", c)
	}
}

func TestSupports(t *testing.T) {
	tests := []struct {
		op               Opcode
		compute, copyEng bool
	}{
		{OpNop, true, true},
		{OpFill, true, true},
		{OpDelay, true, true},
		{OpCopy, false, true},
		{OpSum32, true, false},
		{OpAdd32, true, false},
		{0, false, false},
		{0x7f, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.compute, EngineCompute.Supports(tt.op), "compute.Supports(%v)", tt.op)
		assert.Equal(t, tt.copyEng, EngineCopy.Supports(tt.op), "copy.Supports(%v)", tt.op)
	}
}

func TestStatusIsAnError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", StatusOutOfRange)
	assert.ErrorIs(t, err, StatusOutOfRange, "errors.Is(%v, StatusOutOfRange) = false", err)
	if errors.Is(err, StatusMisaligned) {
		t.Errorf("errors.Is(%v, StatusMisaligned) = true", err)
	}
	assert.Equal(t, "status(99)", Status(99).String(), "Status(99).String()")
}
