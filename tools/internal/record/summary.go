package record

import (
	"slices"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/records"
)

// LimitsFamily is the benchmark family that measures the machine itself; its
// rows go to a record's Limits, not its Rows.
const LimitsFamily = "Baseline"

// Summarise reduces passes to one row per stage and benchmark: each metric
// holds one value per pass (in pass order; MB/s converted to B/s) with its
// best, median, min and max (records.NewMetric); the row holds its canary
// per pass, in the same order, its re-runs over all passes, and whether any
// pass kept an unsteady run. Best is chosen per metric: a row's best ns/op
// and best p99-ns may come from different passes. If a pass reported a
// benchmark more than once, that pass contributes the median of its
// results.
//
// Baseline/... rows go to limits, the rest to rows; both are sorted by
// stage in the order given, each stage's rows in the order they first ran.
func Summarise(passes []Pass, order []string) (rows, limits []records.Row) {
	type key struct{ stage, name string }
	type row struct {
		units  []string // in first-seen order
		values map[string][]float64
		out    records.Row
	}
	byKey := map[key]*row{}
	var keys []key
	for _, p := range passes {
		for _, run := range p.Runs {
			perPass := map[key]map[string][]float64{}
			var passKeys []key
			for _, b := range run.Output.Results() {
				k := key{run.Stage, b.Name}
				if perPass[k] == nil {
					perPass[k] = map[string][]float64{}
					passKeys = append(passKeys, k)
				}
				if byKey[k] == nil {
					byKey[k] = &row{values: map[string][]float64{}, out: records.Row{Stage: k.stage, Benchmark: k.name}}
					keys = append(keys, k)
				}
				r := byKey[k]
				for _, v := range b.Values {
					v = benchfmt.Tidy(v)
					if !slices.Contains(r.units, v.Unit) {
						r.units = append(r.units, v.Unit)
					}
					perPass[k][v.Unit] = append(perPass[k][v.Unit], v.Value)
				}
			}
			for _, k := range passKeys {
				r := byKey[k]
				for unit, vs := range perPass[k] {
					r.values[unit] = append(r.values[unit], records.Median(vs))
				}
				info := run.Rows[k.name]
				if info.HasCanary {
					c := info.Canary
					c.Pass = p.Number
					r.out.Canary = append(r.out.Canary, c)
				}
				r.out.Reruns += info.Reruns
				r.out.Unsteady = r.out.Unsteady || info.Unsteady
			}
		}
	}
	for _, k := range keys {
		r := byKey[k]
		out := r.out
		for _, unit := range r.units {
			out.Metrics = append(out.Metrics, records.NewMetric(unit, r.values[unit]))
		}
		b := benchfmt.Bench{Name: k.name}
		if b.Family() == LimitsFamily {
			limits = append(limits, out)
		} else {
			rows = append(rows, out)
		}
	}
	rec := records.Record{Rows: rows, Limits: limits}
	rec.Sort(order)
	return rec.Rows, rec.Limits
}
