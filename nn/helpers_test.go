package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

// cartPole is the architecture the benchmarks and allocation tests use:
// CartPole's 4 observations, two hidden layers of 64, two actions.
var cartPole = nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}

func newModel(tb testing.TB, spec nn.Spec, seed int64) *nn.ActorCritic {
	tb.Helper()
	m, err := nn.NewActorCritic(spec, seed)
	if err != nil {
		tb.Fatalf("NewActorCritic(%+v): %v", spec, err)
	}
	return m
}

func forward(tb testing.TB, m *nn.ActorCritic, obs []float32, batch int) (*nn.Workspace, *nn.Output) {
	tb.Helper()
	ws, out := nn.NewWorkspace(), new(nn.Output)
	if err := m.Forward(obs, batch, ws, out); err != nil {
		tb.Fatalf("Forward: %v", err)
	}
	return ws, out
}

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// setUnitParams draws every weight of m from N(0, 1/fan-in) and every
// bias from N(0, 0.1²), so that each layer's outputs are of order 1: not
// a rounding-level remnant of the policy head's 0.01 init, nor a large
// sum that cancels to a small output, whose float32 rounding would hide
// the error the comparison looks for.
func setUnitParams(t testing.TB, m *nn.ActorCritic, rng *rand.Rand) {
	t.Helper()
	p := m.Params()
	for _, info := range m.Layout() {
		scale := 0.1
		if len(info.Shape) > 1 {
			fanIn := info.Size() / info.Shape[len(info.Shape)-1]
			scale = 1 / math.Sqrt(float64(fanIn))
		}
		copy(p[info.Offset:], randVec(rng, info.Size(), scale))
	}
}
