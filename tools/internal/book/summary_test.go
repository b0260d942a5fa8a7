package book

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSummary(t *testing.T) {
	type entry struct {
		kind   ItemKind
		title  string
		path   string
		number string
	}
	tests := []struct {
		name  string
		text  string
		title string
		want  []entry
	}{
		{
			name:  "prefix, parts, nesting, draft, separator, suffix",
			title: "Summary",
			text: `# Summary

[Introduction](intro.md)

# Part one

- [One](one.md)
    - [One A](one/a.md)
    - [One B](one/b.md)
        - [One B i](one/b/i.md)
- [Two](two.md)
- [Draft]()

# Part two

* [Three](three.md)

---

[Appendix](appendix.md)
`,
			want: []entry{
				{ItemChapter, "Introduction", "intro.md", ""},
				{ItemPart, "Part one", "", ""},
				{ItemChapter, "One", "one.md", "1."},
				{ItemChapter, "One A", "one/a.md", "1.1."},
				{ItemChapter, "One B", "one/b.md", "1.2."},
				{ItemChapter, "One B i", "one/b/i.md", "1.2.1."},
				{ItemChapter, "Two", "two.md", "2."},
				{ItemChapter, "Draft", "", "3."},
				{ItemPart, "Part two", "", ""},
				{ItemChapter, "Three", "three.md", "4."},
				{ItemSeparator, "", "", ""},
				{ItemChapter, "Appendix", "appendix.md", ""},
			},
		},
		{
			name:  "a title other than Summary names the book",
			title: "softgpu",
			text:  "# softgpu\n- [A](a.md)\n\t- [B](./b.md)\n",
			want: []entry{
				{ItemChapter, "A", "a.md", "1."},
				{ItemChapter, "B", "b.md", "1.1."},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSummary("SUMMARY.md", []byte(tt.text))
			require.NoError(t, err, "ParseSummary")
			assert.Equal(t, tt.title, s.Title, "Title")
			var got []entry
			for _, it := range s.Items {
				got = append(got, entry{it.Kind, it.Title, it.Path, it.NumberString()})
			}
			assert.Equal(t, tt.want, got, "items")
		})
	}
}

func TestParseSummaryErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string // substring of the error, which starts with SUMMARY.md:LINE
	}{
		{"stray text", "# Summary\n\nsome prose\n", "SUMMARY.md:3: cannot read"},
		{"list item without link", "# Summary\n- One\n", "SUMMARY.md:2: want a list item"},
		{"duplicate chapter", "# Summary\n- [A](a.md)\n- [A again](a.md)\n", "SUMMARY.md:3: a.md is already listed on line 2"},
		{"not markdown", "# Summary\n- [A](a.html)\n", "SUMMARY.md:2: chapter link \"a.html\": want a .md file"},
		{"leaves the book", "# Summary\n- [A](../a.md)\n", "SUMMARY.md:2: chapter link \"../a.md\" leaves the book directory"},
		{"fragment", "# Summary\n- [A](a.md#x)\n", "SUMMARY.md:2: chapter link \"a.md#x\""},
		{"part after suffix", "# Summary\n- [A](a.md)\n[B](b.md)\n# Late part\n", "SUMMARY.md:4: part title"},
		{"numbered after suffix", "# Summary\n- [A](a.md)\n[B](b.md)\n- [C](c.md)\n", "SUMMARY.md:4: numbered chapter after the suffix"},
		{"draft prefix", "# Summary\n[A]()\n", "SUMMARY.md:2: a prefix or suffix chapter cannot be a draft"},
		{"empty", "# Summary\n", "no chapters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSummary("SUMMARY.md", []byte(tt.text))
			require.Error(t, err, "ParseSummary(%q) = nil error; want %q", tt.text, tt.want)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseSummary(%q) = %q; want it to contain %q", tt.text, err, tt.want)
			}
		})
	}
}
