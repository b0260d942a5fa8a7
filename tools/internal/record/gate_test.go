package record

import (
	"reflect"
	"testing"

	"softgpu/tools/internal/records"
)

func TestGate(t *testing.T) {
	tests := []struct {
		name      string
		canaries  [][2]float64 // before, after per attempt
		threshold float64
		want      []bool
	}{
		{"none", nil, 0.5, []bool{}},
		{"all calm", [][2]float64{{100, 110}, {105, 100}, {120, 118}}, 0.5, []bool{true, true, true}},
		{"one slow after", [][2]float64{{100, 100}, {100, 300}, {101, 99}}, 0.5, []bool{true, false, true}},
		{"one slow before", [][2]float64{{100, 100}, {160, 100}}, 0.5, []bool{true, false}},
		{"exactly at the limit", [][2]float64{{100, 100}, {150, 150}}, 0.5, []bool{true, true}},
		{"later best rejects an early pass", [][2]float64{{300, 310}, {100, 100}}, 0.5, []bool{false, true}},
		{"best from a rejected pass counts", [][2]float64{{200, 200}, {100, 400}}, 0.5, []bool{false, false}},
		{"zero threshold keeps only the best", [][2]float64{{100, 100}, {100, 101}}, 0, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []records.Canary
			for i, c := range tt.canaries {
				cs = append(cs, records.Canary{Pass: i + 1, Before: c[0], After: c[1]})
			}
			if got := Gate(cs, tt.threshold); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Gate(%v, %v) = %v; want %v", tt.canaries, tt.threshold, got, tt.want)
			}
		})
	}
}
