package nn_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/distrl/distrl/nn"
)

func reportSamples(b *testing.B, batch int) {
	b.ReportMetric(float64(b.N)*float64(batch)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkForward measures inference on CartPole-sized networks at an
// actor's batch of 1, a vectorised actor's 64 and a learner's 512.
func BenchmarkForward(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			m := newModel(b, cartPole, 1)
			obs := randVec(rand.New(rand.NewPCG(1, 2)), batch*cartPole.ObsDim, 1)
			ws, out := nn.NewWorkspace(), new(nn.Output)
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Forward(obs, batch, ws, out); err != nil {
					b.Fatal(err)
				}
			}
			reportSamples(b, batch)
		})
	}
}

// BenchmarkBackward measures the backward pass of a learner minibatch.
func BenchmarkBackward(b *testing.B) {
	const batch = 512
	m := newModel(b, cartPole, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	ws, _ := forward(b, m, randVec(rng, batch*cartPole.ObsDim, 1), batch)
	dOut := &nn.Output{Logits: randVec(rng, batch*cartPole.ActionDim, 1), Values: randVec(rng, batch, 1)}
	grad := make([]float32, m.NumParams())
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Backward(ws, batch, dOut, grad); err != nil {
			b.Fatal(err)
		}
	}
	reportSamples(b, batch)
}

// BenchmarkSampleCategorical measures the sampling a policy worker does
// for every row it serves, on rows of CartPole's 2 and MinAtar's 6 actions.
func BenchmarkSampleCategorical(b *testing.B) {
	for _, actions := range []int{2, 6} {
		b.Run("actions="+strconv.Itoa(actions), func(b *testing.B) {
			const rows = 512
			rng := rand.New(rand.NewPCG(1, 2))
			logits := randVec(rng, rows*actions, 2)
			draws := make([]float64, rows)
			for i := range draws {
				draws[i] = rng.Float64()
			}
			for b.Loop() {
				for r, u := range draws {
					nn.SampleCategoricalWith(logits[r*actions:], actions, u)
				}
			}
			reportSamples(b, rows)
		})
	}
}
