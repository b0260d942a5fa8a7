package stages

// A line diff: Myers' O(ND) algorithm in its linear-space form (E. Myers,
// "An O(ND) Difference Algorithm and Its Variations", 1986, section 4b).
// It finds a shortest edit script, as git's default diff does, using memory
// proportional to the input rather than to the square of the edit distance,
// so a completely rewritten file costs no more memory than an edited one.
//
// The recursion: strip the common prefix and suffix; if one side is empty
// the rest is all inserts or all deletes; otherwise find the middle snake of
// an optimal path and recurse on the two halves around it. After stripping,
// both sides are non-empty and differ at both ends, so the edit distance is
// at least 2 and each half holds strictly fewer edits than the whole: the
// recursion always terminates.

type opKind int8

const (
	opEqual opKind = iota
	opDelete
	opInsert
)

// edit is one step of a script that turns a into b. An equal or delete
// names a line of a (aLine); an equal or insert names a line of b (bLine).
type edit struct {
	kind         opKind
	aLine, bLine int
}

// diffLines returns a shortest edit script from a to b, in order, each run
// of changes between two equal lines given as its deletions, then its
// insertions.
func diffLines(a, b []string) []edit {
	d := &differ{a: a, b: b}
	d.compare(0, len(a), 0, len(b))
	return groupChanges(d.script)
}

// groupChanges reorders each maximal run of non-equal edits so that its
// deletions come before its insertions. Any order within such a run is the
// same edit (its deleted lines and inserted lines are independent), but the
// recursion can interleave them, and a reader expects the old lines, then
// the new ones, as diff and git print them. Positions are rewritten to
// match: a deletion sits at the run's first line of b, an insertion after
// the run's last line of a.
func groupChanges(script []edit) []edit {
	out := make([]edit, 0, len(script))
	for i := 0; i < len(script); {
		if script[i].kind == opEqual {
			out = append(out, script[i])
			i++
			continue
		}
		j := i
		for j < len(script) && script[j].kind != opEqual {
			j++
		}
		run := script[i:j]
		aEnd, bStart := run[0].aLine, run[0].bLine
		for _, e := range run {
			if e.kind == opDelete {
				aEnd = e.aLine + 1
			}
		}
		for _, e := range run {
			if e.kind == opDelete {
				out = append(out, edit{opDelete, e.aLine, bStart})
			}
		}
		for _, e := range run {
			if e.kind == opInsert {
				out = append(out, edit{opInsert, aEnd, e.bLine})
			}
		}
		i = j
	}
	return out
}

type differ struct {
	a, b   []string
	script []edit
	vf, vb []int // furthest-reaching x per diagonal, forward and backward; reused
}

func (d *differ) compare(a0, a1, b0, b1 int) {
	for a0 < a1 && b0 < b1 && d.a[a0] == d.b[b0] {
		d.script = append(d.script, edit{opEqual, a0, b0})
		a0, b0 = a0+1, b0+1
	}
	suffix := 0
	for a1 > a0 && b1 > b0 && d.a[a1-1] == d.b[b1-1] {
		a1, b1 = a1-1, b1-1
		suffix++
	}
	switch {
	case a0 == a1:
		for y := b0; y < b1; y++ {
			d.script = append(d.script, edit{opInsert, a0, y})
		}
	case b0 == b1:
		for x := a0; x < a1; x++ {
			d.script = append(d.script, edit{opDelete, x, b0})
		}
	default:
		x, y, u, v := d.middleSnake(a0, a1, b0, b1)
		d.compare(a0, x, b0, y)
		for ; x < u; x, y = x+1, y+1 {
			d.script = append(d.script, edit{opEqual, x, y})
		}
		d.compare(u, a1, v, b1)
	}
	for i := 0; i < suffix; i++ {
		d.script = append(d.script, edit{opEqual, a1 + i, b1 + i})
	}
}

// middleSnake returns the middle snake (x, y) to (u, v) of a shortest path
// from (a0, b0) to (a1, b1): a run of equal lines crossed by the path at
// the point where the forward and the backward searches meet.
//
// The forward search works on diagonals k = x - y from (0, 0); the backward
// search on diagonals c = x' - y' of the reversed sequences from (n, m), so a
// backward diagonal c is the forward diagonal delta - c. The paths overlap
// when, on one diagonal, the forward x reaches past the backward x: x + x' >= n.
func (d *differ) middleSnake(a0, a1, b0, b1 int) (x, y, u, v int) {
	n, m := a1-a0, b1-b0
	delta := n - m
	odd := delta%2 != 0
	maxD := (n + m + 1) / 2
	size := 2*maxD + 3
	if cap(d.vf) < size {
		d.vf, d.vb = make([]int, size), make([]int, size)
	}
	vf, vb := d.vf[:size], d.vb[:size]
	off := maxD + 1
	vf[off+1], vb[off+1] = 0, 0
	for step := 0; step <= maxD; step++ {
		for k := -step; k <= step; k += 2 {
			var x int
			if k == -step || (k != step && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1] // down: an insert
			} else {
				x = vf[off+k-1] + 1 // right: a delete
			}
			y := x - k
			startX, startY := x, y
			for x < n && y < m && d.a[a0+x] == d.b[b0+y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			if c := delta - k; odd && c >= -(step-1) && c <= step-1 && x+vb[off+c] >= n {
				return a0 + startX, b0 + startY, a0 + x, b0 + y
			}
		}
		for c := -step; c <= step; c += 2 {
			var x int
			if c == -step || (c != step && vb[off+c-1] < vb[off+c+1]) {
				x = vb[off+c+1]
			} else {
				x = vb[off+c-1] + 1
			}
			y := x - c
			startX, startY := x, y
			for x < n && y < m && d.a[a1-1-x] == d.b[b1-1-y] {
				x, y = x+1, y+1
			}
			vb[off+c] = x
			if k := delta - c; !odd && k >= -step && k <= step && x+vf[off+k] >= n {
				return a0 + n - x, b0 + m - y, a0 + n - startX, b0 + m - startY
			}
		}
	}
	panic("stages: middleSnake found no overlap (invariant: forward and backward searches meet by step ceil((n+m)/2))")
}
