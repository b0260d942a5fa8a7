package stages

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apply runs script on a and returns the b it describes, failing if the
// script names lines out of order or contradicts a or b.
func apply(t *testing.T, a, b []string, script []edit) []string {
	t.Helper()
	var out []string
	nextA, nextB := 0, 0
	for _, e := range script {
		switch e.kind {
		case opEqual:
			if e.aLine != nextA || e.bLine != nextB || a[e.aLine] != b[e.bLine] {
				t.Fatalf("bad equal %+v at a=%d b=%d", e, nextA, nextB)
			}
			out = append(out, a[e.aLine])
			nextA, nextB = nextA+1, nextB+1
		case opDelete:
			require.Equal(t, nextA, e.aLine, "bad delete %+v at a", e)
			nextA++
		case opInsert:
			require.Equal(t, nextB, e.bLine, "bad insert %+v at b", e)
			out = append(out, b[e.bLine])
			nextB++
		}
	}
	if nextA != len(a) || nextB != len(b) {
		t.Fatalf("script stops at a=%d b=%d; want %d %d", nextA, nextB, len(a), len(b))
	}
	return out
}

// lcsLength is the textbook dynamic program; a shortest edit script has
// len(a)+len(b)-2*lcs edits.
func lcsLength(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func TestDiffLinesCases(t *testing.T) {
	tests := []struct {
		name      string
		a, b      string
		wantEdits int
	}{
		{"equal", "abc", "abc", 0},
		{"both empty", "", "", 0},
		{"insert into empty", "", "abc", 3},
		{"delete all", "abc", "", 3},
		{"replace middle", "abc", "axc", 2},
		{"paper example", "abcabba", "cbabac", 5},
		{"disjoint", "abc", "xyz", 6},
		{"odd delta", "abcd", "xbc", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := strings.Split(tt.a, ""), strings.Split(tt.b, "")
			script := diffLines(a, b)
			got := apply(t, a, b, script)
			assert.Equal(t, tt.b, strings.Join(got, ""), "apply(diffLines(%q, %q))", tt.a, tt.b)
			added, removed := countChanges(script)
			assert.Equal(t, tt.wantEdits, added+removed, "diffLines(%q, %q) has %d edits", tt.a, tt.b, added+removed)
		})
	}
}

// TestDiffLinesShortest checks on random inputs that every script turns a
// into b and is as short as the longest common subsequence allows.
func TestDiffLinesShortest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := randomLines(rng, rng.IntN(20), 1+rng.IntN(4))
		b := randomLines(rng, rng.IntN(20), 1+rng.IntN(4))
		script := diffLines(a, b)
		got := apply(t, a, b, script)
		require.Equal(t, strings.Join(b, ","), strings.Join(got, ","), "case %d: apply(diffLines(%q, %q)) = %q", i, a, b, got)
		added, removed := countChanges(script)
		require.Equal(t, len(a)+len(b)-2*lcsLength(a, b), added+removed, "case %d: diffLines(%q, %q) has %d edits", i, a, b, added+removed)
	}
}

func randomLines(rng *rand.Rand, n, alphabet int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + rng.IntN(alphabet)))
	}
	return out
}

// TestDiffLinesGrouped pins the shape a reader sees: a run of changes is
// its old lines, then its new ones, never interleaved.
func TestDiffLinesGrouped(t *testing.T) {
	a := []string{"if x == old {", "fail(old)", "}", "if old != other {", "fail(other)", "}"}
	b := []string{"if x == new {", "fail(new)", "}"}
	script := diffLines(a, b)
	var got []string
	for _, e := range script {
		switch e.kind {
		case opEqual:
			got = append(got, " "+a[e.aLine])
		case opDelete:
			got = append(got, "-"+a[e.aLine])
		case opInsert:
			got = append(got, "+"+b[e.bLine])
		}
	}
	want := []string{
		"-if x == old {", "-fail(old)", "-}", "-if old != other {", "-fail(other)",
		"+if x == new {", "+fail(new)", " }",
	}
	assert.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"), "diffLines(%q, %q)", a, b)
	apply(t, a, b, script)
}
