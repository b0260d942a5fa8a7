package uapi

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite include/softgpu_uapi.h from the Go tables")

// TestCHeaderIsCurrent: the committed header is what the generator makes
// of the Go tables now. With -update it rewrites the header instead.
func TestCHeaderIsCurrent(t *testing.T) {
	want, err := cHeader()
	require.NoError(t, err, "generating the C header")
	if *update {
		require.NoError(t, os.WriteFile(headerPath, []byte(want), 0o644))
		return
	}
	got, err := readHeader()
	require.NoError(t, err, "%v (go test ./uapi -run CHeader -update writes it)", err)
	if got != want {
		gotLines, wantLines := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gotLines), len(wantLines)) {
			require.Equal(t, wantLines[i], gotLines[i], "%s is stale at line %d\nrun: go test ./uapi -run CHeader -update", headerPath, i+1)
		}
		t.Fatalf("%s is stale: %d lines; the generator makes %d\nrun: go test ./uapi -run CHeader -update",
			headerPath, len(gotLines), len(wantLines))
	}
}

// TestCHeaderCompiles compiles the generated header with the system's C
// compiler, with a file of _Static_asserts that pins, against the values
// Go computed, every struct's size, every field's offset, every request
// number and every constant — so the C compiler's layout, not only the
// header's text, agrees with Go's.
func TestCHeaderCompiles(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: cc is not on PATH; the header's layout is not checked against C")
	}
	header, err := cHeader()
	require.NoError(t, err, "generating the C header")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "softgpu_uapi.h"), []byte(header), 0o644))
	var src strings.Builder
	// <errno.h> first: its errno macro must not break the header.
	src.WriteString("#include <errno.h>\n#include <stddef.h>\n#include \"softgpu_uapi.h\"\n\n")
	assert := func(expr string, want uint64, what string) {
		fmt.Fprintf(&src, "_Static_assert((%s) == %dULL, %q);\n", expr, want, what)
	}
	for _, typ := range argStructs() {
		name := "struct " + cStructName(typ)
		assert("sizeof("+name+")", uint64(typ.Size()), "sizeof "+typ.Name())
		for i := range typ.NumField() {
			f := typ.Field(i)
			assert(fmt.Sprintf("offsetof(%s, %s)", name, cFieldName(typ, f)), uint64(f.Offset), typ.Name()+"."+f.Name)
			assert(fmt.Sprintf("sizeof(((%s *)0)->%s)", name, cFieldName(typ, f)), uint64(f.Type.Size()), "size of "+typ.Name()+"."+f.Name)
		}
	}
	for _, c := range Calls {
		name := "SOFTGPU_IOCTL_" + c.Name
		assert(name, uint64(c.Request), "request number of "+c.Name)
		assert(name+"_FDS_IN", uint64(c.FDsIn), "FDsIn of "+c.Name)
		assert(name+"_FDS_OUT", uint64(c.FDsOut), "FDsOut of "+c.Name)
		assert("SOFTGPU_IOC_SIZE("+name+")", uint64(Size(c.Request)), "SOFTGPU_IOC_SIZE of "+c.Name)
		assert("SOFTGPU_IOC_DIR("+name+")", uint64(Dir(c.Request)), "SOFTGPU_IOC_DIR of "+c.Name)
	}
	for _, s := range constSections() {
		for _, c := range s.consts {
			assert(cName(c.name), c.value, c.name)
		}
	}
	for _, m := range cMacros() {
		for _, s := range m.samples {
			assert(s.call, s.want, s.call)
		}
	}
	file := filepath.Join(dir, "check.c")
	require.NoError(t, os.WriteFile(file, []byte(src.String()), 0o644))
	cmd := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", dir, "-c", file, "-o", filepath.Join(dir, "check.o"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
}

// TestSnake pins the Go-to-C name rule on the names that could go wrong.
func TestSnake(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ErrNoMemory", "err_no_memory"},
		{"RegID", "reg_id"},
		{"VA", "va"},
		{"OpSum32", "op_sum32"},
		{"Page4K", "page4k"},
		{"StatusNoDMA", "status_no_dma"},
		{"MaxFDs", "max_fds"},
		{"FDsIn", "fds_in"},
		{"AttachFDPublic", "attach_fd_public"},
		{"Status", "status"},
		{"ClockEpoch", "clock_epoch"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, snake(tt.in), "snake(%q)", tt.in)
	}
	assert.Equal(t, "softgpu_channel_open", cStructName(reflect.TypeOf(ChannelOpen{})), "cStructName(ChannelOpen)")
}
