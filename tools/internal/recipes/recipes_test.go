package recipes

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/stages"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		text    string
		want    []Recipe
		wantErr string
	}{
		{
			name: "unmarked blocks are not recipes",
			file: "README.md",
			text: "# x\n\n```sh\ngo test ./...\n```\n",
		},
		{
			name: "a marked block runs in the README's directory",
			file: "stage0-mailbox/README.md",
			text: "text\n<!-- recipe -->\n```sh\ngo test .\necho done\n```\n",
			want: []Recipe{{File: "stage0-mailbox/README.md", Line: 3, Dir: "stage0-mailbox", Script: "go test .\necho done\n"}},
		},
		{
			name: "a directory relative to the README, blank lines before the fence",
			file: "stage0-mailbox/README.md",
			text: "<!-- recipe: .. -->\n\n```sh\ncp -r stage0-mailbox /tmp/x\n```\n",
			want: []Recipe{{File: "stage0-mailbox/README.md", Line: 3, Dir: ".", Script: "cp -r stage0-mailbox /tmp/x\n"}},
		},
		{
			name: "two recipes keep their order",
			file: "README.md",
			text: "<!-- recipe -->\n```sh\na\n```\nmiddle\n<!--recipe: tools-->\n```sh\nb\n```\n",
			want: []Recipe{
				{File: "README.md", Line: 2, Dir: ".", Script: "a\n"},
				{File: "README.md", Line: 7, Dir: "tools", Script: "b\n"},
			},
		},
		{name: "a marker before prose", file: "README.md", text: "<!-- recipe -->\nsome words\n```sh\na\n```\n", wantErr: "README.md:1: a recipe marker must be followed"},
		{name: "a marker before another language", file: "README.md", text: "<!-- recipe -->\n```text\na\n```\n", wantErr: "must be followed by a ```sh block"},
		{name: "a marker at the end", file: "README.md", text: "x\n<!-- recipe -->\n", wantErr: "README.md:2: a recipe marker with no"},
		{name: "two markers in a row", file: "README.md", text: "<!-- recipe -->\n<!-- recipe -->\n```sh\na\n```\n", wantErr: "README.md:1: a recipe marker with no"},
		{name: "a block that never closes", file: "README.md", text: "<!-- recipe -->\n```sh\na\n", wantErr: "README.md:2: the recipe's block never closes"},
		{name: "an empty block", file: "README.md", text: "<!-- recipe -->\n```sh\n\n```\n", wantErr: "is empty"},
		{name: "a directory outside the repository", file: "stage0-mailbox/README.md", text: "<!-- recipe: ../.. -->\n```sh\na\n```\n", wantErr: "outside the repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.file, tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err, "Parse")
			require.Equal(t, len(tt.want), len(got), "Parse found %d recipes (%+v)", len(got), got)
			for i := range got {
				assert.Equal(t, tt.want[i], got[i], "recipe %d", i)
			}
		})
	}
}

// TestTheRepositorysRecipesParse keeps a broken marker in any README from
// waiting for CI's recipe run to be noticed, and checks that the kinds of
// recipe the READMEs promise (trace, copied-out comparison, the C client's
// build) are marked in every place they appear.
func TestTheRepositorysRecipesParse(t *testing.T) {
	root, err := stages.Root()
	require.NoError(t, err)
	all, err := Find(root)
	require.NoError(t, err, "Find")
	has := func(file, substr string) bool {
		for _, r := range all {
			if r.File == file && strings.Contains(r.Script, substr) {
				return true
			}
		}
		return false
	}
	for _, s := range stages.Order {
		readme := s.Dir + "/README.md"
		if !has(readme, "SOFTGPU_TRACE=") {
			t.Errorf("%s has no trace recipe marked <!-- recipe -->", readme)
		}
		if !has(readme, "benchstat@") {
			t.Errorf("%s has no copied-out comparison recipe marked <!-- recipe -->", readme)
		}
	}
	if !has("stage9-chardev/examples/c/README.md", "cc ") {
		t.Errorf("the C client's build is not a marked recipe")
	}
	if !has("README.md", "go tool benchstat") {
		t.Errorf("the top README's stage comparison is not a marked recipe")
	}
}
