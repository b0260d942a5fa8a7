package book

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDirective(t *testing.T) {
	tests := []struct {
		body       string
		name       string
		args       map[string]string
		positional []string
	}{
		{"include stage0-mailbox/x.go:a", "include", map[string]string{}, []string{"stage0-mailbox/x.go:a"}},
		{"diff stage0-mailbox stage1-ring", "diff", map[string]string{}, []string{"stage0-mailbox", "stage1-ring"}},
		{`table record=r  stage=a,b caption="a \"quoted\" caption }}" unit=ns/op`, "table",
			map[string]string{"record": "r", "stage": "a,b", "caption": `a "quoted" caption }}`, "unit": "ns/op"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := parseDirective(tt.body)
			require.NoError(t, err, "parseDirective(%q)", tt.body)
			if d.Name != tt.name || !reflect.DeepEqual(d.Args, tt.args) || !reflect.DeepEqual(d.Positional, tt.positional) {
				t.Errorf("parseDirective(%q) = %q %v %v; want %q %v %v", tt.body, d.Name, d.Args, d.Positional, tt.name, tt.args, tt.positional)
			}
		})
	}
}

func TestExpandInCode(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"escape in prose", `a \{{#value record=x}} b`, "a {{#value record=x}} b"},
		{"escape in a code span", "`\\{{#include x.go:a}}`", "`{{#include x.go:a}}`"},
		{"escape in a fence", "```\n\\{{#include x.go}}\n\\{{#value record=x}}\n```\n", "```\n{{#include x.go}}\n{{#value record=x}}\n```\n"},
		{"bare value in a code span", "`{{#meta record=test field=command}}`", "`go run ./tools/cmd/record -stages stage0-mailbox,stage1-ring -passes 3`"},
		{"bare value in a double-backtick span", "``a {{#meta record=test field=rejected}} b``", "``a 1 b``"},
		{"bare value in a fence", "~~~~sh\n$ {{#meta record=test field=command}}\n~~~~\n", "~~~~sh\n$ go run ./tools/cmd/record -stages stage0-mailbox,stage1-ring -passes 3\n~~~~\n"},
		{"include in a fence: bare lines, indented as the directive", "- x\n\n  ```go\n  {{#include stage0-mailbox/device/engine.go:body}}\n  ```\n",
			"- x\n\n  ```go\n  if seq := e.doorbell.Load(); seq != e.done.Load() {\n  \te.execute(seq)\n  }\n  ```\n"},
		{"span then prose", "`{{#meta record=test field=rejected}}` and {{#meta record=test field=rejected}}", "`1` and <span class=\"meta\" title=\"test.json: rejected\">1</span>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, _ := expandOK(t, b, tt.src)
			assert.Equal(t, tt.want, md, "expand(%q)", tt.src)
		})
	}
}

func TestDirectiveErrors(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"unknown directive", "x {{#nosuch a=b}} y", `unknown directive "nosuch"`},
		{"block directive inline", "see {{#table record=test stage=stage1-ring unit=ns/op}} here", "put it alone on its own line"},
		{"unterminated", "x {{#value record=test", "no closing }}"},
		{"unknown record", "{{#value record=nosuch stage=stage1-ring bench=Fill/size=64B unit=ns/op}}", `unknown record "nosuch"`},
		{"unknown stage", "{{#value record=test stage=stage7-idle bench=Fill/size=64B unit=ns/op}}", `record test has no stage "stage7-idle" (stages: stage0-mailbox, stage1-ring, limits)`},
		{"unknown benchmark", "{{#value record=test stage=stage1-ring bench=Nosuch unit=ns/op}}", `record test has no benchmark "Nosuch"`},
		{"unknown unit", "{{#value record=test stage=stage1-ring bench=Fill/size=64B unit=furlongs/op}}", `unknown unit "furlongs/op"`},
		{"misspelt argument", "{{#value record=test stage=stage1-ring bench=Fill/size=64B unit=ns/op stats=best}}", "unknown argument stats="},
		{"bad stat", "{{#value record=test stage=stage1-ring bench=Fill/size=64B unit=ns/op stat=mean}}", "stat=mean: want best, median, lowest, highest or passN"},
		{"pass beyond the record", "{{#value record=test stage=stage1-ring bench=Fill/size=64B unit=ns/op stat=pass4}}", "stat=pass4: record test has 3 accepted passes"},
		{"pass zero", "{{#value record=test stage=stage1-ring bench=Fill/size=64B unit=ns/op stat=pass0}}", "stat=pass0: want best, median, lowest, highest or passN"},
		{"missing argument", "{{#value record=test stage=stage1-ring unit=ns/op}}", "missing bench="},
		{"bad ratio operand", "{{#ratio record=test a=stage1-ring b=stage1-ring:Fill/size=64B unit=ns/op}}", "want a=STAGE:BENCHMARK"},
		{"unknown meta field", "{{#meta record=test field=colour}}", `unknown field "colour"`},
		{"table: no benchmark matches", "{{#table record=test stage=stage1-ring bench=Nosuch/.* unit=ns/op}}", "no benchmark of stage1-ring in record test matches bench=Nosuch/.*"},
		{"table: unknown unit", "{{#table record=test stage=stage1-ring bench=Fill/.* unit=B/op}}", `unknown unit "B/op"`},
		{"table: unknown ref", "{{#table record=test stage=stage1-ring bench=Fill/.* unit=ns/op ref=nosuch}}", `ref=: unknown record "nosuch"`},
		{"chart: unknown key", "{{#chart record=test stage=stage1-ring bench=FillStream/.* unit=ns/op x=size2}}", "x=size2: no such key"},
		{"chart: log of zero", "{{#chart record=test stage=stage1-ring bench=FillStream/.* unit=wakeups/op log=on}}", "log axis needs positive values"},
		{"chart: ambiguous", "{{#chart record=test stage=stage1-ring bench=.* unit=ns/op x=stage}}", "both land on"},
		{"table inside a fence", "```\n{{#table record=test stage=stage1-ring unit=ns/op}}\n```", "cannot go inside a fenced code block"},
		{"diff: first stage", "{{#diff stage0-mailbox}}", "stage0-mailbox is the first stage"},
		{"diff: missing stage", "{{#diff stage7-idle}}", "stage stage4-nolock does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chapter := "first line\n" + tt.src + "\n"
			x := expand(t, b, chapter)
			if len(x.Errs) == 0 {
				t.Fatalf("expand(%s) gave no error; want %q", tt.src, tt.want)
			}
			// The error must name the line the directive is on.
			line := 1 + strings.Count(chapter[:strings.Index(chapter, "{{#")], "\n")
			prefix := fmt.Sprintf("book/test.md:%d: ", line)
			msg := x.Errs[0].Error()
			if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.want) {
				t.Errorf("expand(%s) error = %q; want %s... %s", tt.src, msg, prefix, tt.want)
			}
		})
	}
}
