// Package benchfmt reads the text that `go test -bench` (or a test binary run
// with -test.bench) prints, and writes it back in the form benchstat reads.
//
// The format is the Go benchmark data format (golang.org/design/14313):
//
//	goos: linux                                   configuration line "key: value"
//	pkg: softgpu/stage1-ring
//	BenchmarkFill/size=64B-2   1000   812 ns/op   0.91 cores    result line
//
// A result line is "Benchmark" + name, an optional -N GOMAXPROCS suffix, an
// iteration count, then value/unit pairs. Every other line (PASS, ok, log
// output, --- BENCH: blocks) is kept as Other and dropped by the writer.
//
// Invariants of a parsed Result:
//   - Name has no "Benchmark" prefix and no -N suffix;
//   - Procs >= 1 (1 when the line had no suffix, as go test prints it);
//   - Values are in the order and the units the line printed them.
package benchfmt

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Kind says what a line of benchmark output is.
type Kind int

const (
	Other  Kind = iota // anything that is neither of the two below
	Config             // "key: value"
	Result             // a benchmark result
)

// Value is one measurement on a result line.
type Value struct {
	Value float64
	Unit  string // as printed: "ns/op", "MB/s", "cores", "p99-ns", ...
}

// Bench is one parsed result line.
type Bench struct {
	Name   string // e.g. "Baseline/pingpong"
	Procs  int    // the -N suffix; 1 when absent
	Iters  int64  // iterations the result averages over
	Values []Value
}

// Value returns the value with the given unit as printed.
func (b *Bench) Value(unit string) (float64, bool) {
	for _, v := range b.Values {
		if v.Unit == unit {
			return v.Value, true
		}
	}
	return 0, false
}

// Family is the first element of the name: "Baseline" for "Baseline/pingpong".
func (b *Bench) Family() string {
	family, _, _ := strings.Cut(b.Name, "/")
	return family
}

// Line is one line of output.
type Line struct {
	Kind  Kind
	Text  string // the line as read, without its newline
	Key   string // Config: the key
	Val   string // Config: the value
	Bench *Bench // Result: the parsed result
}

// Output is a parsed stream of benchmark output, in input order.
type Output struct {
	Lines []Line
}

// Results returns the result lines' benchmarks in order.
func (o *Output) Results() []*Bench {
	var out []*Bench
	for _, l := range o.Lines {
		if l.Kind == Result {
			out = append(out, l.Bench)
		}
	}
	return out
}

// Names returns the distinct benchmark names in first-seen order.
func (o *Output) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range o.Results() {
		if !seen[b.Name] {
			seen[b.Name] = true
			out = append(out, b.Name)
		}
	}
	return out
}

// Config returns the last value given for key, as benchstat would apply it
// to the results after it, and whether there was one.
func (o *Output) Config(key string) (string, bool) {
	val, ok := "", false
	for _, l := range o.Lines {
		if l.Kind == Config && l.Key == key {
			val, ok = l.Val, true
		}
	}
	return val, ok
}

// Parse reads benchmark output. A line that starts like a result ("Benchmark"
// name and an iteration count) but whose values do not parse is an error,
// not Other: it almost always means a benchmark wrote to stdout mid-line,
// and silently dropping its figures would be worse than stopping.
func Parse(r io.Reader) (*Output, error) {
	out := &Output{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line, err := ParseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("benchfmt: line %d: %w", n, err)
		}
		out.Lines = append(out.Lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchfmt: %w", err)
	}
	return out, nil
}

// ParseString is Parse on a string.
func ParseString(s string) (*Output, error) {
	return Parse(strings.NewReader(s))
}

// ParseLine classifies and parses one line.
func ParseLine(text string) (Line, error) {
	text = strings.TrimRight(text, "\r")
	if key, val, ok := configLine(text); ok {
		return Line{Kind: Config, Text: text, Key: key, Val: val}, nil
	}
	fields := strings.Fields(text)
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "Benchmark") {
		return Line{Kind: Other, Text: text}, nil
	}
	iters, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		// "BenchmarkX-2 \t--- FAIL: ..." and the like: not a result.
		return Line{Kind: Other, Text: text}, nil
	}
	name, procs := SplitName(fields[0])
	bench := &Bench{Name: name, Procs: procs, Iters: iters}
	pairs := fields[2:]
	if len(pairs)%2 != 0 {
		return Line{}, fmt.Errorf("result %s: odd number of value/unit fields %q", fields[0], pairs)
	}
	for i := 0; i < len(pairs); i += 2 {
		v, err := strconv.ParseFloat(pairs[i], 64)
		if err != nil {
			return Line{}, fmt.Errorf("result %s: value %q for unit %q: %w", fields[0], pairs[i], pairs[i+1], err)
		}
		bench.Values = append(bench.Values, Value{Value: v, Unit: pairs[i+1]})
	}
	return Line{Kind: Result, Text: text, Bench: bench}, nil
}

// SplitName turns "BenchmarkFill/size=64B-2" into ("Fill/size=64B", 2).
// A name without a -N suffix (GOMAXPROCS=1) has procs 1. A "Benchmark"
// prefix is optional.
func SplitName(full string) (name string, procs int) {
	name = strings.TrimPrefix(full, "Benchmark")
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 && !strings.HasPrefix(name[i+1:], "+") {
			return name[:i], n
		}
	}
	return name, 1
}

// configLine reports whether text is "key: value" in the benchmark format's
// sense: the key starts with a lower-case letter and holds no space or
// upper-case letter.
func configLine(text string) (key, val string, ok bool) {
	key, val, found := strings.Cut(text, ":")
	if !found || key == "" || key[0] < 'a' || key[0] > 'z' {
		return "", "", false
	}
	for _, c := range key {
		if c == ' ' || c == '\t' || (c >= 'A' && c <= 'Z') {
			return "", "", false
		}
	}
	if val != "" && val[0] != ' ' && val[0] != '\t' {
		return "", "", false // "key:value" is not a config line; "url:..." in log output
	}
	return key, strings.TrimSpace(val), true
}

// Without returns the result line l with the values of the given units
// taken out, and the values taken. Its Text is rebuilt from the line's own
// fields, tab-separated as go test separates them, so every value kept is
// written with the digits it was printed with. A line that is not a result,
// or has none of the units, is returned as it is.
func (l Line) Without(units ...string) (Line, []Value) {
	if l.Kind != Result || !slices.ContainsFunc(l.Bench.Values, func(v Value) bool { return slices.Contains(units, v.Unit) }) {
		return l, nil
	}
	fields := strings.Fields(l.Text)
	kept := []string{fields[0], fields[1]}
	bench := *l.Bench
	bench.Values = nil
	var taken []Value
	for i, pair := 0, fields[2:]; i+1 < len(pair); i += 2 {
		v := l.Bench.Values[i/2]
		if slices.Contains(units, v.Unit) {
			taken = append(taken, v)
			continue
		}
		kept = append(kept, pair[i]+" "+pair[i+1])
		bench.Values = append(bench.Values, v)
	}
	return Line{Kind: Result, Text: strings.Join(kept, "\t"), Bench: &bench}, taken
}
