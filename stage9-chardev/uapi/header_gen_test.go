package uapi

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"softgpu/stage9-chardev/abi"
)

// The C header's generator. include/softgpu_uapi.h is never written by
// hand: cHeader builds it from the tables of this package and of abi —
// Calls, the argument structs, the errnos, the memfd layout, the
// constants below — and takes every comment from the Go source, so the
// header cannot say something the Go code does not. It lives in a test
// file because it reads that source (go/parser, from the package's own
// directory, where `go test` runs) and so that the daemon does not link
// it. TestCHeaderIsCurrent compares its output with the committed file.

// headerPath is the generated file, relative to this package's directory.
const headerPath = "../include/softgpu_uapi.h"

// cConst is one #define of the header: a Go constant by name, its value
// as compiled, and how to print it.
type cConst struct {
	pkg   string // "uapi" or "abi": whose source holds the constant
	name  string // its Go name; the C name is cName(name)
	value uint64
	hex   bool
}

func u(name string, v uint64) cConst  { return cConst{"uapi", name, v, false} }
func ux(name string, v uint64) cConst { return cConst{"uapi", name, v, true} }
func a(name string, v uint64) cConst  { return cConst{"abi", name, v, false} }
func ax(name string, v uint64) cConst { return cConst{"abi", name, v, true} }

// cSection is a titled group of constants.
type cSection struct {
	title  string
	consts []cConst
}

// constSections is every constant the header defines besides the request
// numbers, in the order it defines them. The names are checked against
// the Go source (a name that is not a constant there, or whose source
// value is not the value given, fails the generation).
func constSections() []cSection {
	return []cSection{
		{"Versions and capabilities (uapi/args.go)", []cConst{
			u("VersionMajor", VersionMajor), u("VersionMinor", VersionMinor),
			ux("CapManaged", CapManaged), ux("CapTrace", CapTrace),
			u("InfoEngines", InfoEngines),
		}},
		{"File descriptor positions in SCM_RIGHTS (uapi/args.go)", []cConst{
			u("AttachFDPublic", AttachFDPublic), u("AttachFDKick", AttachFDKick), u("AttachFDIrq", AttachFDIrq),
			u("ChannelFDUser", ChannelFDUser), u("ChannelFDStatus", ChannelFDStatus),
			u("HostRegisterFDMemory", HostRegisterFDMemory),
		}},
		{"Errors: the Errno of a reply (uapi/errno.go)", []cConst{
			u("OK", uint64(OK)), u("ErrBadRequest", uint64(ErrBadRequest)), u("ErrSize", uint64(ErrSize)),
			u("ErrFDs", uint64(ErrFDs)), u("ErrInval", uint64(ErrInval)), u("ErrNotNegotiated", uint64(ErrNotNegotiated)),
			u("ErrVersion", uint64(ErrVersion)), u("ErrNoMemory", uint64(ErrNoMemory)), u("ErrNoChannel", uint64(ErrNoChannel)),
			u("ErrNoEntry", uint64(ErrNoEntry)), u("ErrPerm", uint64(ErrPerm)), u("ErrGone", uint64(ErrGone)),
			u("ErrBusy", uint64(ErrBusy)), u("ErrFault", uint64(ErrFault)), u("ErrQuota", uint64(ErrQuota)),
		}},
		{"The memfds' layouts (uapi/memfd.go)", []cConst{
			u("PageSize", PageSize),
			ux("UserDoorbellOffset", UserDoorbellOffset), ux("UserRingOffset", UserRingOffset),
			ux("StatusPageOffset", StatusPageOffset), ux("StatusCompletionsOffset", StatusCompletionsOffset),
			u("CompletionIndexWord", CompletionIndexWord), u("CompletionStatusWord", CompletionStatusWord),
			ux("PublicGlobalOffset", PublicGlobalOffset),
		}},
		{"The command descriptor (abi/command.go)", []cConst{
			a("CommandSize", abi.CommandSize),
			a("OffOpcode", abi.OffOpcode), a("OffFlags", abi.OffFlags), a("OffContext", abi.OffContext),
			a("OffSeq", abi.OffSeq), a("OffSrc", abi.OffSrc), a("OffDst", abi.OffDst),
			a("OffSize", abi.OffSize), a("OffValue", abi.OffValue), a("OffFence", abi.OffFence),
		}},
		{"Opcodes and engines (abi/opcode.go)", []cConst{
			ax("OpNop", uint64(abi.OpNop)), ax("OpFill", uint64(abi.OpFill)), ax("OpCopy", uint64(abi.OpCopy)),
			ax("OpDelay", uint64(abi.OpDelay)), ax("OpSum32", uint64(abi.OpSum32)), ax("OpAdd32", uint64(abi.OpAdd32)),
			a("EngineCompute", uint64(abi.EngineCompute)), a("EngineCopy", uint64(abi.EngineCopy)),
			a("NumEngines", abi.NumEngines), a("NumChannels", abi.NumChannels),
		}},
		{"Command flags (abi/fence.go)", []cConst{
			ax("FlagFence", abi.FlagFence), ax("FlagInterrupt", abi.FlagInterrupt),
		}},
		{"Completion status: word CompletionStatusWord of a completion entry (abi/status.go)", []cConst{
			a("StatusOK", uint64(abi.StatusOK)), a("StatusBadOpcode", uint64(abi.StatusBadOpcode)),
			a("StatusWrongEngine", uint64(abi.StatusWrongEngine)), a("StatusBadFlags", uint64(abi.StatusBadFlags)),
			a("StatusOutOfRange", uint64(abi.StatusOutOfRange)), a("StatusMisaligned", uint64(abi.StatusMisaligned)),
			a("StatusAborted", uint64(abi.StatusAborted)), a("StatusReserved", uint64(abi.StatusReserved)),
			a("StatusNoDMA", uint64(abi.StatusNoDMA)), a("StatusReadOnly", uint64(abi.StatusReadOnly)),
			a("StatusBadEntry", uint64(abi.StatusBadEntry)), a("StatusBadContext", uint64(abi.StatusBadContext)),
			a("StatusCtxFaulted", uint64(abi.StatusCtxFaulted)), a("StatusTimeout", uint64(abi.StatusTimeout)),
			a("StatusRemoved", uint64(abi.StatusRemoved)),
		}},
		{"The rings (abi/ring.go)", []cConst{
			a("CompletionSize", abi.CompletionSize), a("CompletionWords", abi.CompletionWords),
		}},
		{"A channel's doorbell page: the user memfd's first page (abi/registers.go, abi/fence.go)", []cConst{
			ax("RegDoorbell", abi.RegDoorbell), ax("RegIrqArm", abi.RegIrqArm), ax("RegIrqTarget", abi.RegIrqTarget),
			a("IrqOff", abi.IrqOff), a("IrqTarget", abi.IrqTarget), a("IrqEvery", abi.IrqEvery),
		}},
		{"A channel's status page: the status memfd's first page (abi/registers.go, abi/fence.go)", []cConst{
			ax("RegChannelFault", abi.RegChannelFault), ax("RegChannelFaultValue", abi.RegChannelFaultValue),
			ax("RegFence", abi.RegFence), ax("RegFenceCycles", abi.RegFenceCycles), ax("RegIrqCount", abi.RegIrqCount),
			a("FaultNone", uint64(abi.FaultNone)), a("FaultDoorbell", uint64(abi.FaultDoorbell)),
			a("FaultTimeout", uint64(abi.FaultTimeout)), a("FaultState", uint64(abi.FaultState)),
		}},
		{"The global page: the public memfd's page at PublicGlobalOffset (abi/registers.go)", []cConst{
			ax("RegID", abi.RegID), ax("RegMemSize", abi.RegMemSize), ax("RegRingSize", abi.RegRingSize),
			ax("RegDeviceState", abi.RegDeviceState),
			ax("DeviceID", abi.DeviceID), a("DeviceRunning", abi.DeviceRunning), a("DeviceStopped", abi.DeviceStopped),
		}},
		{"An engine's status page: the public memfd's page at PublicEngineOffset(e) (abi/registers.go, abi/idle.go)", []cConst{
			ax("RegEngineState", abi.RegEngineState), ax("RegNeedWakeup", abi.RegNeedWakeup),
			a("EngineRunning", abi.EngineRunning), a("EngineStopped", abi.EngineStopped), a("EngineAsleep", abi.EngineAsleep),
		}},
		{"Channel priorities, for ChannelOpen.Priority (abi/runlist.go)", []cConst{
			a("PriorityLow", abi.PriorityLow), a("PriorityNormal", abi.PriorityNormal),
			a("PriorityHigh", abi.PriorityHigh), a("MaxPriority", abi.MaxPriority),
		}},
		{"Page sizes, for Alloc.PageSize and HostRegister.PageSize (abi/vm.go)", []cConst{
			ax("Page4K", uint64(abi.Page4K)), ax("Page64K", uint64(abi.Page64K)), ax("Page2M", uint64(abi.Page2M)),
		}},
		{"Idle modes, for EngineInfo.IdleMode (abi/idle.go)", []cConst{
			a("IdleHybrid", uint64(abi.IdleHybrid)), a("IdleSpin", uint64(abi.IdleSpin)),
			a("IdleSleep", uint64(abi.IdleSleep)), a("IdleAdaptive", uint64(abi.IdleAdaptive)),
		}},
	}
}

// cMacro is a function of the Go code written as a C macro, with sample
// arguments at which TestCHeaderCompiles checks it against the Go function.
type cMacro struct {
	doc     string
	def     string // "NAME(args) body"
	samples []cSample
}

type cSample struct {
	call string // "SOFTGPU_USER_SIZE(64)"
	want uint64
}

// cMacros are the functions a C client needs, as macros.
func cMacros() []cMacro {
	var m []cMacro
	add := func(doc, def string, samples ...cSample) { m = append(m, cMacro{doc, def, samples}) }
	s := func(call string, want uint64) cSample { return cSample{call, want} }
	add("Offset of the slot of the command with ring index i in the submission ring; mask is RingSize-1 (abi.SlotOffset).",
		"SOFTGPU_SLOT_OFFSET(i, mask) (((uint64_t)(i) & (mask)) * SOFTGPU_COMMAND_SIZE)",
		s("SOFTGPU_SLOT_OFFSET(70, 63)", abi.SlotOffset(70, 63)), s("SOFTGPU_SLOT_OFFSET(1000, 255)", abi.SlotOffset(1000, 255)))
	add("Word, in the completion ring seen as uint64_t words, of the entry of the command with ring index i (abi.CompletionWord).",
		"SOFTGPU_COMPLETION_WORD(i, mask) (((uint64_t)(i) & (mask)) * SOFTGPU_COMPLETION_WORDS)",
		s("SOFTGPU_COMPLETION_WORD(70, 63)", abi.CompletionWord(70, 63)), s("SOFTGPU_COMPLETION_WORD(1000, 255)", abi.CompletionWord(1000, 255)))
	add("Whether a completion entry holding index entry says that command i has completed, wrap-safe (abi.Completed).",
		"SOFTGPU_COMPLETED(entry, i) ((int64_t)((uint64_t)(entry) - (uint64_t)(i)) >= 0)",
		s("SOFTGPU_COMPLETED(5, 5)", 1), s("SOFTGPU_COMPLETED(4, 5)", 0), s("SOFTGPU_COMPLETED(0, 0xffffffffffffffffULL)", 1))
	add("Whether a fence timeline at value timeline has reached fence, wrap-safe (abi.Reached).",
		"SOFTGPU_REACHED(timeline, fence) ((int64_t)((uint64_t)(timeline) - (uint64_t)(fence)) >= 0)",
		s("SOFTGPU_REACHED(9, 10)", 0), s("SOFTGPU_REACHED(10, 10)", 1))
	add("Offset of engine e's status page in the public memfd (PublicEngineOffset).",
		"SOFTGPU_PUBLIC_ENGINE_OFFSET(e) ((uint64_t)SOFTGPU_PAGE_SIZE * (1 + (uint64_t)(e)))",
		s("SOFTGPU_PUBLIC_ENGINE_OFFSET(0)", PublicEngineOffset(0)), s("SOFTGPU_PUBLIC_ENGINE_OFFSET(1)", PublicEngineOffset(1)))
	add("Bytes of the public memfd (PublicSize).",
		"SOFTGPU_PUBLIC_SIZE ((uint64_t)SOFTGPU_PAGE_SIZE * (1 + SOFTGPU_NUM_ENGINES))",
		s("SOFTGPU_PUBLIC_SIZE", PublicSize()))
	add("Bytes of a channel's user memfd for rings of ring_size slots (UserSize).",
		"SOFTGPU_USER_SIZE(ring_size) (SOFTGPU_USER_RING_OFFSET + SOFTGPU_ROUND_PAGE((uint64_t)(ring_size) * SOFTGPU_COMMAND_SIZE))",
		s("SOFTGPU_USER_SIZE(1)", UserSize(1)), s("SOFTGPU_USER_SIZE(256)", UserSize(256)), s("SOFTGPU_USER_SIZE(1024)", UserSize(1024)))
	add("Bytes of a channel's status memfd for rings of ring_size slots (StatusSize).",
		"SOFTGPU_STATUS_SIZE(ring_size) (SOFTGPU_STATUS_COMPLETIONS_OFFSET + SOFTGPU_ROUND_PAGE((uint64_t)(ring_size) * SOFTGPU_COMPLETION_SIZE))",
		s("SOFTGPU_STATUS_SIZE(1)", StatusSize(1)), s("SOFTGPU_STATUS_SIZE(256)", StatusSize(256)), s("SOFTGPU_STATUS_SIZE(1024)", StatusSize(1024)))
	add("n rounded up to a multiple of SOFTGPU_PAGE_SIZE.",
		"SOFTGPU_ROUND_PAGE(n) (((uint64_t)(n) + SOFTGPU_PAGE_SIZE - 1) & ~(uint64_t)(SOFTGPU_PAGE_SIZE - 1))",
		s("SOFTGPU_ROUND_PAGE(1)", PageSize), s("SOFTGPU_ROUND_PAGE(4096)", PageSize), s("SOFTGPU_ROUND_PAGE(4097)", 2*PageSize))
	return m
}

// cName turns a Go name into the header's: "ErrNoMemory" into
// "SOFTGPU_ERR_NO_MEMORY", "RegID" into "SOFTGPU_REG_ID".
func cName(goName string) string { return "SOFTGPU_" + strings.ToUpper(snake(goName)) }

// snake turns a Go name into lower snake case: a word starts at an upper
// case letter after a lower case one, or at the last upper case letter of
// a run followed by a lower case one ("VAOffset" → "va_offset") — unless
// that lower case letter is an acronym's plural s ("FDsIn" → "fds_in");
// digits stay with the word before them ("Page4K" → "page4k").
func snake(goName string) string {
	var b strings.Builder
	r := []rune(goName)
	isUpper := func(c rune) bool { return 'A' <= c && c <= 'Z' }
	isLower := func(c rune) bool { return 'a' <= c && c <= 'z' }
	plural := func(i int) bool { return r[i] == 's' && (i+1 == len(r) || !isLower(r[i+1])) }
	for i, c := range r {
		if i > 0 && isUpper(c) && (isLower(r[i-1]) || isUpper(r[i-1]) && i+1 < len(r) && isLower(r[i+1]) && !plural(i+1)) {
			b.WriteByte('_')
		}
		b.WriteRune(c)
	}
	return strings.ToLower(b.String())
}

// cFieldRenames are the fields whose C name cannot be their snake case
// Go name: errno is a macro of <errno.h>.
var cFieldRenames = map[string]string{"Header.Errno": "errnum"}

// cFieldName returns the C name of field f of struct t.
func cFieldName(t reflect.Type, f reflect.StructField) string {
	if name, ok := cFieldRenames[t.Name()+"."+f.Name]; ok {
		return name
	}
	return snake(f.Name)
}

// cStructName returns the C tag of a Go struct: "ChannelOpen" →
// "softgpu_channel_open".
func cStructName(t reflect.Type) string { return "softgpu_" + snake(t.Name()) }

// goSource is what the generator reads from a package's source: the
// comment of each constant, type and field, and each constant's
// expression, to check the values it is given.
type goSource struct {
	docs   map[string]string   // "Name" or "Type.Field" → comment text
	consts map[string]ast.Expr // constant name → its value expression
	fset   *token.FileSet
}

// readSource parses the non-test Go files of dir.
func readSource(dir string) (*goSource, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	src := &goSource{docs: map[string]string{}, consts: map[string]ast.Expr{}, fset: fset}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gen.Specs {
				switch spec := spec.(type) {
				case *ast.ValueSpec:
					if gen.Tok != token.CONST {
						continue
					}
					for i, id := range spec.Names {
						src.docs[id.Name] = commentOf(spec.Doc, spec.Comment)
						if i < len(spec.Values) {
							src.consts[id.Name] = spec.Values[i]
						}
					}
				case *ast.TypeSpec:
					doc := spec.Doc
					if doc == nil && len(gen.Specs) == 1 {
						doc = gen.Doc
					}
					src.docs[spec.Name.Name] = commentOf(doc, nil)
					st, ok := spec.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						for _, id := range field.Names {
							src.docs[spec.Name.Name+"."+id.Name] = commentOf(field.Doc, field.Comment)
						}
					}
				}
			}
		}
	}
	return src, nil
}

// commentOf returns the text of a declaration's line comment, or else of
// its doc comment. The line comment first: in a const block, the comment
// above a constant often heads the group that follows rather than
// describing that one constant.
func commentOf(doc, line *ast.CommentGroup) string {
	if text := strings.TrimSpace(line.Text()); text != "" {
		return text
	}
	return strings.TrimSpace(doc.Text())
}

// eval computes a constant expression of the source: literals, other
// constants of the same package, and integer arithmetic. It is how the
// generator checks that the name it prints beside a value is the
// constant that has that value.
func (src *goSource) eval(e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return constant.MakeFromLiteral(e.Value, e.Kind, 0), nil
	case *ast.ParenExpr:
		return src.eval(e.X)
	case *ast.Ident:
		x, ok := src.consts[e.Name]
		if !ok {
			return nil, fmt.Errorf("%s is not a constant with a value", e.Name)
		}
		return src.eval(x)
	case *ast.CallExpr: // a conversion: Status(1)
		if len(e.Args) == 1 {
			return src.eval(e.Args[0])
		}
	case *ast.BinaryExpr:
		x, err := src.eval(e.X)
		if err != nil {
			return nil, err
		}
		y, err := src.eval(e.Y)
		if err != nil {
			return nil, err
		}
		if e.Op == token.SHL || e.Op == token.SHR {
			n, _ := constant.Uint64Val(y)
			return constant.Shift(x, e.Op, uint(n)), nil
		}
		if e.Op == token.QUO {
			return constant.BinaryOp(x, token.QUO_ASSIGN, y), nil // go/constant's integer division
		}
		return constant.BinaryOp(x, e.Op, y), nil
	}
	return nil, fmt.Errorf("cannot evaluate %T at %v", e, src.fset.Position(e.Pos()))
}

// check reports whether the source has constant name with value v.
func (src *goSource) check(name string, v uint64) error {
	e, ok := src.consts[name]
	if !ok {
		return fmt.Errorf("%s is not a constant of the source", name)
	}
	x, err := src.eval(e)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if got, exact := constant.Uint64Val(x); !exact || got != v {
		return fmt.Errorf("%s is %v in the source; the generator was given %#x", name, x, v)
	}
	return nil
}

// headerWriter accumulates the header's text.
type headerWriter struct {
	strings.Builder
}

func (w *headerWriter) printf(format string, args ...any) { fmt.Fprintf(w, format, args...) }

// comment writes text as a C comment at indent: one line if it fits, a
// block otherwise.
func (w *headerWriter) comment(indent, text string) {
	if text == "" {
		return
	}
	text = strings.ReplaceAll(text, "*/", "* /")
	lines := strings.Split(text, "\n")
	if len(lines) == 1 && len(indent)*8+len(text) <= 100 {
		w.printf("%s/* %s */\n", indent, text)
		return
	}
	w.printf("%s/*\n", indent)
	for _, l := range lines {
		w.printf("%s", strings.TrimRight(indent+" * "+l, " \t")+"\n")
	}
	w.printf("%s */\n", indent)
}

// define writes a #define of a value, with a U suffix on what does not
// fit an int.
func (w *headerWriter) define(name string, v uint64, hex bool) {
	text := fmt.Sprint(v)
	if hex {
		text = fmt.Sprintf("0x%x", v)
	}
	switch {
	case v > 1<<32-1:
		text += "ULL"
	case v > 1<<31-1:
		text += "U"
	}
	w.printf("#define %s %s\n", name, text)
}

// argStructs returns the structs of the header, each once, nested ones
// before the structs that hold them.
func argStructs() []reflect.Type {
	var types []reflect.Type
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			visit(t.Field(i).Type)
		}
		types = append(types, t)
	}
	visit(reflect.TypeOf(Header{}))
	for _, c := range Calls {
		visit(reflect.TypeOf(c.New()).Elem())
	}
	return types
}

// cField returns the C declaration of field f of struct st:
// "uint64_t reserved[3]".
func cField(st reflect.Type, f reflect.StructField) string {
	name, t := cFieldName(st, f), f.Type
	for t.Kind() == reflect.Array {
		name += fmt.Sprintf("[%d]", t.Len())
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Uint32:
		return "uint32_t " + name
	case reflect.Uint64:
		return "uint64_t " + name
	case reflect.Struct:
		return "struct " + cStructName(t) + " " + name
	}
	panic(fmt.Sprintf("cField: %s of kind %v", f.Name, t.Kind()))
}

// iocMacro names the SOFTGPU_IO* macro of a direction.
var iocMacro = map[uint32]string{
	IocNone: "SOFTGPU_IO", IocRead: "SOFTGPU_IOR", IocWrite: "SOFTGPU_IOW", IocRead | IocWrite: "SOFTGPU_IOWR",
}

// cHeader returns the text of include/softgpu_uapi.h.
func cHeader() (string, error) {
	uapiSrc, err := readSource(".")
	if err != nil {
		return "", err
	}
	abiSrc, err := readSource("../abi")
	if err != nil {
		return "", err
	}
	sources := map[string]*goSource{"uapi": uapiSrc, "abi": abiSrc}
	var w headerWriter

	w.printf("/* Code generated by go test ./uapi -run CHeader -update; DO NOT EDIT. */\n\n")
	w.comment("", `softgpu_uapi.h: the interface of softgpud, the softgpu device daemon,
for clients written in C. It is generated from the Go package
softgpu/stage9-chardev/uapi (whose package documentation describes the
protocol) and from the constants of package abi a client needs to submit
commands by stores into the memory it maps.

A call is one SOCK_SEQPACKET datagram: a struct softgpu_header, then the
argument struct if the request's direction has SOFTGPU_IOC_WRITE. The reply
echoes the request and seq, carries the errno, and the argument struct if
the direction has SOFTGPU_IOC_READ. File descriptors travel in SCM_RIGHTS.
Every integer is little-endian; every struct is laid out without padding.`)
	w.printf("\n#ifndef SOFTGPU_UAPI_H\n#define SOFTGPU_UAPI_H\n\n#include <stdint.h>\n\n")

	w.comment("", "Request numbers, laid out as Linux's _IOC (asm-generic/ioctl.h).")
	for _, d := range []struct {
		name string
		v    int
	}{
		{"NRBITS", IocNrBits}, {"TYPEBITS", IocTypeBits}, {"SIZEBITS", IocSizeBits}, {"DIRBITS", IocDirBits},
		{"NRSHIFT", IocNrShift}, {"TYPESHIFT", IocTypeShift}, {"SIZESHIFT", IocSizeShift}, {"DIRSHIFT", IocDirShift},
	} {
		w.printf("#define SOFTGPU_IOC_%s %d\n", d.name, d.v)
	}
	w.printf("#define SOFTGPU_IOC_NRMASK ((1U << SOFTGPU_IOC_NRBITS) - 1)\n")
	w.printf("#define SOFTGPU_IOC_TYPEMASK ((1U << SOFTGPU_IOC_TYPEBITS) - 1)\n")
	w.printf("#define SOFTGPU_IOC_SIZEMASK ((1U << SOFTGPU_IOC_SIZEBITS) - 1)\n")
	w.printf("#define SOFTGPU_IOC_DIRMASK ((1U << SOFTGPU_IOC_DIRBITS) - 1)\n")
	w.printf("#define SOFTGPU_IOC_NONE %dU\n#define SOFTGPU_IOC_WRITE %dU\n#define SOFTGPU_IOC_READ %dU\n", IocNone, IocWrite, IocRead)
	w.printf(`#define SOFTGPU_IOC(dir, type, nr, size) \
	(((dir) << SOFTGPU_IOC_DIRSHIFT) | \
	 ((type) << SOFTGPU_IOC_TYPESHIFT) | \
	 ((nr) << SOFTGPU_IOC_NRSHIFT) | \
	 ((size) << SOFTGPU_IOC_SIZESHIFT))
#define SOFTGPU_IO(type, nr) SOFTGPU_IOC(SOFTGPU_IOC_NONE, (type), (nr), 0)
#define SOFTGPU_IOR(type, nr, argtype) SOFTGPU_IOC(SOFTGPU_IOC_READ, (type), (nr), sizeof(argtype))
#define SOFTGPU_IOW(type, nr, argtype) SOFTGPU_IOC(SOFTGPU_IOC_WRITE, (type), (nr), sizeof(argtype))
#define SOFTGPU_IOWR(type, nr, argtype) SOFTGPU_IOC(SOFTGPU_IOC_READ | SOFTGPU_IOC_WRITE, (type), (nr), sizeof(argtype))
#define SOFTGPU_IOC_DIR(req) (((req) >> SOFTGPU_IOC_DIRSHIFT) & SOFTGPU_IOC_DIRMASK)
#define SOFTGPU_IOC_TYPE(req) (((req) >> SOFTGPU_IOC_TYPESHIFT) & SOFTGPU_IOC_TYPEMASK)
#define SOFTGPU_IOC_NR(req) (((req) >> SOFTGPU_IOC_NRSHIFT) & SOFTGPU_IOC_NRMASK)
#define SOFTGPU_IOC_SIZE(req) (((req) >> SOFTGPU_IOC_SIZESHIFT) & SOFTGPU_IOC_SIZEMASK)
`)
	w.comment("", uapiSrc.docs["Magic"])
	w.printf("#define SOFTGPU_IOC_MAGIC '%c'\n\n", Magic)

	w.comment("", "Message framing (uapi/message.go).")
	for _, c := range []cConst{u("HeaderSize", HeaderSize), u("MaxMessage", MaxMessage), u("MaxFDs", MaxFDs)} {
		w.comment("", uapiSrc.docs[c.name])
		w.define(cName(c.name), c.value, false)
	}
	w.printf("\n")

	for _, t := range argStructs() {
		w.comment("", uapiSrc.docs[t.Name()])
		w.printf("struct %s {\n", cStructName(t))
		for i := range t.NumField() {
			f := t.Field(i)
			doc := uapiSrc.docs[t.Name()+"."+f.Name]
			if r := f.Tag.Get("uapi"); r != "" {
				doc = r + ": " + doc
			}
			w.comment("\t", doc)
			w.printf("\t%s;\n", cField(t, f))
		}
		w.printf("};\n")
		w.printf("_Static_assert(sizeof(struct %s) == %d, \"struct %s is %d bytes\");\n\n",
			cStructName(t), t.Size(), cStructName(t), t.Size())
	}

	w.comment("", "The calls (uapi/calls.go): request numbers, and the file descriptors\neach call carries and each successful reply carries.")
	for _, c := range Calls {
		name := "SOFTGPU_IOCTL_" + c.Name
		w.printf("#define %s %s(SOFTGPU_IOC_MAGIC, 0x%02x, struct %s)\n",
			name, iocMacro[Dir(c.Request)], Nr(c.Request), cStructName(reflect.TypeOf(c.New()).Elem()))
		w.printf("#define %s_FDS_IN %d\n#define %s_FDS_OUT %d\n", name, c.FDsIn, name, c.FDsOut)
	}
	w.printf("\n")

	for _, s := range constSections() {
		w.comment("", s.title)
		for _, c := range s.consts {
			src := sources[c.pkg]
			if err := src.check(c.name, c.value); err != nil {
				return "", fmt.Errorf("%s.%w", c.pkg, err)
			}
			w.comment("", src.docs[c.name])
			w.define(cName(c.name), c.value, c.hex)
		}
		w.printf("\n")
	}

	w.comment("", "Functions of the Go packages a C client needs, as macros.")
	for _, m := range cMacros() {
		w.comment("", m.doc)
		w.printf("#define %s\n", m.def)
	}
	w.printf("\n#endif /* SOFTGPU_UAPI_H */\n")
	return w.String(), nil
}

// readHeader returns the committed header.
func readHeader() (string, error) {
	b, err := os.ReadFile(headerPath)
	return string(b), err
}
