package benchrun

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Benchtime is a -test.benchtime value, checked here so that a bad one is
// named before anything is built or run (a test binary given one prints
// its whole usage and the culprit is lost in it). It is either a duration
// per benchmark (1s, 300ms) or a count of iterations (100x), both
// positive, as the testing package accepts them. It is a flag.Value.
type Benchtime struct {
	Duration time.Duration // > 0 for a duration
	Count    int           // > 0 for an iteration count ("Nx")
}

// ParseBenchtime parses a -benchtime value.
func ParseBenchtime(s string) (Benchtime, error) {
	if n, ok := strings.CutSuffix(s, "x"); ok {
		count, err := strconv.Atoi(n)
		if err != nil || count <= 0 {
			return Benchtime{}, fmt.Errorf("-benchtime %q: want a positive count of iterations like 100x, or a duration like 1s", s)
		}
		return Benchtime{Count: count}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return Benchtime{}, fmt.Errorf("-benchtime %q: want a positive duration like 1s or 300ms, or a count of iterations like 100x", s)
	}
	return Benchtime{Duration: d}, nil
}

// MustBenchtime is ParseBenchtime for a value known to be good (a default).
func MustBenchtime(s string) Benchtime {
	b, err := ParseBenchtime(s)
	if err != nil {
		panic(err)
	}
	return b
}

// String returns the value as -test.benchtime takes it; "" for the zero
// Benchtime (the testing package's default).
func (b Benchtime) String() string {
	switch {
	case b.Count > 0:
		return strconv.Itoa(b.Count) + "x"
	case b.Duration > 0:
		return b.Duration.String()
	}
	return ""
}

// Set parses s into b (flag.Value). The flag package prefixes the error
// with the flag's name and the value, so the message keeps only the reason.
func (b *Benchtime) Set(s string) error {
	v, err := ParseBenchtime(s)
	if err != nil {
		_, reason, _ := strings.Cut(err.Error(), ": ")
		return fmt.Errorf("%s", reason)
	}
	*b = v
	return nil
}

// Exactly returns a -test.bench pattern that selects the one benchmark
// named name ("Gap/gap=30us", as benchfmt names it) and nothing else: each
// element of the name, quoted and anchored, so `^BenchmarkGap$/^gap=30us$`.
// The testing package matches a pattern element by element, so this runs
// the leaf alone, however its parents nest their b.Run calls.
func Exactly(name string) string {
	elems := strings.Split(name, "/")
	elems[0] = "Benchmark" + elems[0]
	for i, e := range elems {
		elems[i] = "^" + regexp.QuoteMeta(e) + "$"
	}
	return strings.Join(elems, "/")
}
