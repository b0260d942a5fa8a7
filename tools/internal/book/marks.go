package book

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// This file places a chart's marks= among its categories. The x axis of a
// chart is categorical, but its categories are usually quantities in order
// (gap=0, 3us, 30us, 300us, 3ms; size=4KiB, 64KiB, 1MiB): a mark such as
// 50us then falls between 30us and 300us, interpolated logarithmically
// between two positive neighbours (linearly from a zero), so the idle
// budgets can be drawn on the gap axis they govern. A mark on an axis of
// names must name a category.
//
//	marks="10us,50us,200us"            labelled 10µs, 50µs, 200µs
//	marks="50us:default budget"        a label of its own after ':'

// quantityRE reads a benchmark key's value as a number and a unit.
var quantityRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(ns|us|µs|ms|s|B|KiB|MiB|GiB|KB|MB|GB|k|M)?$`)

// quantity is a parsed value: its magnitude in the dimension's base unit
// (ns, bytes, or a plain count) and the dimension, "" for a bare number.
type quantity struct {
	v   float64
	dim string
}

var unitScale = map[string]struct {
	dim   string
	scale float64
}{
	"ns": {"time", 1}, "us": {"time", 1e3}, "µs": {"time", 1e3}, "ms": {"time", 1e6}, "s": {"time", 1e9},
	"B": {"size", 1}, "KiB": {"size", 1 << 10}, "MiB": {"size", 1 << 20}, "GiB": {"size", 1 << 30},
	"KB": {"size", 1e3}, "MB": {"size", 1e6}, "GB": {"size", 1e9},
	"k": {"", 1e3}, "M": {"", 1e6},
}

func parseQuantity(s string) (quantity, bool) {
	m := quantityRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return quantity{}, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return quantity{}, false
	}
	u := unitScale[m[2]]
	if m[2] == "" {
		u.scale = 1
	}
	return quantity{v * u.scale, u.dim}, true
}

// compatible reports whether two quantities can be compared: the same
// dimension, or one of them a bare zero (gap=0 among durations).
func (q quantity) compatible(o quantity) bool {
	return q.dim == o.dim || q.v == 0 && q.dim == "" || o.v == 0 && o.dim == ""
}

// placeMarks places each mark of spec among the categories.
func placeMarks(categories []string, spec string) ([]chartMark, error) {
	// The categories as quantities, if they all are, in increasing order.
	var qs []quantity
	numeric := len(categories) > 1
	for i, c := range categories {
		q, ok := parseQuantity(c)
		if !ok || (i > 0 && (!q.compatible(qs[i-1]) || q.v <= qs[i-1].v)) {
			numeric = false
			break
		}
		qs = append(qs, q)
	}
	var marks []chartMark
	for _, item := range splitList(spec) {
		value, label, hasLabel := strings.Cut(item, ":")
		value = strings.TrimSpace(value)
		if !hasLabel || strings.TrimSpace(label) == "" {
			label = displayKeyValue(value)
		}
		pos, err := markPosition(categories, qs, numeric, value)
		if err != nil {
			return nil, err
		}
		marks = append(marks, chartMark{Pos: pos, Label: strings.TrimSpace(label)})
	}
	if len(marks) == 0 {
		return nil, fmt.Errorf("no marks in %q", spec)
	}
	return marks, nil
}

func markPosition(categories []string, qs []quantity, numeric bool, value string) (float64, error) {
	for i, c := range categories {
		if c == value {
			return float64(i), nil
		}
	}
	if !numeric {
		return 0, fmt.Errorf("%q is not a category of this chart (categories: %s), and they are not quantities in order to place it among", value, strings.Join(categories, ", "))
	}
	q, ok := parseQuantity(value)
	if !ok || !q.compatible(qs[len(qs)-1]) {
		return 0, fmt.Errorf("%q is not a quantity like the categories (%s)", value, strings.Join(categories, ", "))
	}
	for i := 0; i+1 < len(qs); i++ {
		a, b := qs[i].v, qs[i+1].v
		if q.v < a || q.v > b {
			continue
		}
		if a > 0 {
			return float64(i) + math.Log(q.v/a)/math.Log(b/a), nil
		}
		return float64(i) + (q.v-a)/(b-a), nil
	}
	return 0, fmt.Errorf("%q lies outside the categories' range %s … %s", value, categories[0], categories[len(categories)-1])
}
