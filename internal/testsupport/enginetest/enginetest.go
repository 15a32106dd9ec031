// Package enginetest holds what the tests of a learner on an nn.Engine
// share: how far one network's parameters or gradient are from
// another's.
package enginetest

import (
	"math"
	"testing"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/nn/cuda"
)

// RelDiff is, per tensor of the layout, the largest difference between
// got and want over the largest magnitude of want's (1e-30 at least):
// "within 1e-4 relative" of a tensor whose values span orders of
// magnitude. It returns the worst tensor's, and its name; NaN anywhere
// is NaN.
func RelDiff(layout []nn.ParamInfo, got, want []float32) (float64, string) {
	worst, name := 0.0, ""
	for _, p := range layout {
		var d, m float64
		for i := p.Offset; i < p.Offset+p.Size(); i++ {
			d = max(d, math.Abs(float64(got[i])-float64(want[i])))
			m = max(m, math.Abs(float64(want[i])))
			if math.IsNaN(float64(got[i])) || math.IsNaN(float64(want[i])) {
				return math.NaN(), p.Name
			}
		}
		if r := d / max(m, 1e-30); r > worst {
			worst, name = r, p.Name
		}
	}
	return worst, name
}

// Norm is the Euclidean norm of x, to tell a gradient from zeros.
func Norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// NormDiff is, per tensor of the layout, ‖got - want‖ / ‖want‖ (‖want‖ at
// least 1e-30), the worst tensor's and its name; NaN anywhere is NaN. It
// weighs each element by its size, so that one element whose value moved
// with the rounding of a ReLU at its kink (a unit that is off in one
// computation and just on in the other) counts for what it is among the
// tensor's thousands, where RelDiff counts it whole.
func NormDiff(layout []nn.ParamInfo, got, want []float32) (float64, string) {
	worst, name := 0.0, ""
	for _, p := range layout {
		var d, m float64
		for i := p.Offset; i < p.Offset+p.Size(); i++ {
			e := float64(got[i]) - float64(want[i])
			d += e * e
			m += float64(want[i]) * float64(want[i])
		}
		if math.IsNaN(d) {
			return math.NaN(), p.Name
		}
		if r := math.Sqrt(d) / max(math.Sqrt(m), 1e-30); r > worst {
			worst, name = r, p.Name
		}
	}
	return worst, name
}

// Use moves a learner onto the engine open opens (set is its SetEngine)
// and closes the engine (close is its Close) when the test ends.
func Use(t testing.TB, set func(nn.OpenEngine) error, close func() error, open nn.OpenEngine) {
	t.Helper()
	if err := set(open); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := close(); err != nil {
			t.Error(err)
		}
	})
}

// Plain opens open's engine as a plain nn.Engine, hiding whatever else it
// can do, so that a learner takes its steps one at a time even where the
// engine takes them whole: the way to measure and test that path too.
func Plain(open nn.OpenEngine) nn.OpenEngine {
	return func(net *nn.ActorCritic, opt *nn.Adam) (nn.Engine, error) {
		e, err := open(net, opt)
		if err != nil {
			return nil, err
		}
		return struct{ nn.Engine }{e}, nil
	}
}

// EmulatedMaxRows is the largest batch a GPU test runs on nn/cuda's host
// emulator (the build tag cudaemu): it runs a GPU's threads one after
// another, so 8192 rows of a 512x512 network take a minute there. A batch
// of 513 rows already spans several tiles of every kernel and a partial
// one; the larger ones run on a GPU (scripts/gpu-check.sh).
const EmulatedMaxRows = 513

// DeviceSizes is sizes, less those over EmulatedMaxRows on the emulator.
func DeviceSizes(sizes ...int) []int {
	if !cuda.Emulated {
		return sizes
	}
	var out []int
	for _, n := range sizes {
		if n <= EmulatedMaxRows {
			out = append(out, n)
		}
	}
	return out
}
