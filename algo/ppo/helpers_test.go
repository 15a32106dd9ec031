package ppo

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
)

// cartPoleSpec is the CartPole network of the learning test and benchmark.
var cartPoleSpec = nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}

// tinyImage is a convolutional network on 4×4×2 observations small enough
// for finite differences: a padded, strided 3×3 convolution of 3 filters
// (4×4 → 2×2×3), then a hidden layer of 8.
var tinyImage = nn.Spec{ObsDim: 32, InputShape: []int{4, 4, 2}, Conv: []nn.ConvLayer{{Filters: 3, Kernel: 3, Stride: 2, Padding: 1}},
	Hidden: []int{8}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}

func newNet(tb testing.TB, spec nn.Spec, seed int64) *nn.ActorCritic {
	tb.Helper()
	net, err := nn.NewActorCritic(spec, seed)
	if err != nil {
		tb.Fatalf("NewActorCritic: %v", err)
	}
	return net
}

func newLearner(tb testing.TB, spec nn.Spec, cfg Config) *Learner {
	tb.Helper()
	l, err := NewLearner(newNet(tb, spec, 1), cfg)
	if err != nil {
		tb.Fatalf("NewLearner: %v", err)
	}
	return l
}

// batchSpec describes a synthetic batch: its length and where episodes end.
type batchSpec struct {
	t          int
	terminated []int // steps with Terminated = 1
	truncated  []int // steps with Truncated = 1
}

// randBatch returns a batch of s.t steps for a network of spec with random
// observations, actions, rewards, values and log-probabilities. The
// log-probabilities are plausible for a near-uniform policy, not those of
// any particular network.
func randBatch(rng *rand.Rand, spec nn.Spec, s batchSpec) *api.SampleBatch {
	n, a := s.t, spec.ActionDim
	b := &api.SampleBatch{
		Obs:            api.NewFrames(api.NewTensor[float32](n, spec.ObsDim)),
		Rewards:        api.NewTensor[float32](n),
		Terminated:     api.NewTensor[uint8](n),
		Truncated:      api.NewTensor[uint8](n),
		LogProbs:       api.NewTensor[float32](n),
		Values:         api.NewTensor[float32](n),
		BootstrapValue: float32(rng.NormFloat64()),
	}
	fill(rng, b.Obs.Data, 1)
	fill(rng, b.Rewards.Data, 1)
	fill(rng, b.Values.Data, 1)
	for i := range b.LogProbs.Data {
		b.LogProbs.Data[i] = float32(-math.Log(float64(a)) + 0.1*rng.NormFloat64())
	}
	if spec.Head == nn.Gaussian {
		b.ContActions = api.NewTensor[float32](n, a)
		fill(rng, b.ContActions.Data, 1)
	} else {
		b.Actions = api.NewTensor[int32](n)
		for i := range b.Actions.Data {
			b.Actions.Data[i] = rng.Int32N(int32(a))
		}
	}
	for _, t := range s.terminated {
		b.Terminated.Data[t] = 1
	}
	for _, t := range s.truncated {
		b.Truncated.Data[t] = 1
	}
	return b
}

func fill(rng *rand.Rand, x []float32, scale float64) {
	for i := range x {
		x[i] = float32(scale * rng.NormFloat64())
	}
}
