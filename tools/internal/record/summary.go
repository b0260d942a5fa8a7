package record

import (
	"slices"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/records"
)

// StageRun is one stage's benchmark output within a pass.
type StageRun struct {
	Stage  string
	Output *benchfmt.Output
}

// Pass is one run of every chosen stage.
type Pass struct {
	Attempt int        // 1-based attempt number, counting rejected passes
	Runs    []StageRun // in the order the stages ran
}

// LimitsFamily is the benchmark family that measures the machine itself; its
// rows go to a record's Limits, not its Rows.
const LimitsFamily = "Baseline"

// Summarise reduces passes to one row per stage and benchmark: each metric
// holds one value per pass (in pass order; MB/s converted to B/s), the best
// of them (lowest, or highest for rates, records.HigherIsBetter) and their
// median. Best is chosen per metric: a row's best ns/op and best p99-ns may
// come from different passes. If a pass reported a benchmark more than once,
// that pass contributes the median of its results.
//
// Baseline/... rows go to limits, the rest to rows; both are sorted by
// stage in the order given, each stage's rows in the order they first ran.
func Summarise(passes []Pass, order []string) (rows, limits []records.Row) {
	type key struct{ stage, name string }
	type row struct {
		units  []string // in first-seen order
		values map[string][]float64
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
				r := byKey[k]
				if r == nil {
					r = &row{values: map[string][]float64{}}
					byKey[k] = r
					keys = append(keys, k)
				}
				for _, v := range b.Values {
					v = benchfmt.Tidy(v)
					if !slices.Contains(r.units, v.Unit) {
						r.units = append(r.units, v.Unit)
					}
					perPass[k][v.Unit] = append(perPass[k][v.Unit], v.Value)
				}
			}
			for _, k := range passKeys {
				for unit, vs := range perPass[k] {
					byKey[k].values[unit] = append(byKey[k].values[unit], Median(vs))
				}
			}
		}
	}
	for _, k := range keys {
		r := byKey[k]
		out := records.Row{Stage: k.stage, Benchmark: k.name}
		for _, unit := range r.units {
			vs := r.values[unit]
			out.Metrics = append(out.Metrics, records.NewMetric(unit, vs))
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

// Median is records.Median: the lower middle value for an even count.
func Median(values []float64) float64 { return records.Median(values) }
