package benchfmt

import "math"

// Units. go test prints bandwidth as "MB/s" (10^6 bytes per second, from
// b.SetBytes); benchstat converts it to "B/s" before it compares anything.
// The records store what benchstat would: Tidy turns MB/s into B/s and leaves
// every other unit, ns/op included, exactly as printed, so a record's units
// are the ones a reader sees in the benchmark output, except bandwidth, which
// is in bytes per second everywhere (records, reference record, book).

// Tidy returns v in the unit the records use. B/s is rounded to a whole
// byte per second: go test prints MB/s with two decimals, so nothing finer
// was measured, and the rounding keeps float noise (…0.00001) out of the
// records.
func Tidy(v Value) Value {
	if v.Unit == "MB/s" {
		return Value{Value: math.Round(v.Value * 1e6), Unit: "B/s"}
	}
	return v
}
