package dqn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

// minAtarSpec is MinAtar's network as the Ape-X built-ins' learner has it.
var minAtarSpec = nn.Spec{ObsDim: 400, InputShape: []int{10, 10, 4}, Conv: []nn.ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}},
	Hidden: []int{128}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 6}

// BenchmarkUpdate is a DQN update (double, dueling) of MinAtar's network
// on the CPU learner at the Ape-X built-ins' batch of 64 and at 512: what
// bounds an Ape-X trial without a GPU. samples/s counts the batch's
// transitions. (BenchmarkUpdateMinAtar, with the tag cuda, holds the GPU
// learner against the same.)
func BenchmarkUpdate(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Dueling = true
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("net=minatar/batch=%d", n), func(b *testing.B) {
			batch := engineBatch(rand.New(rand.NewPCG(1, 1)), minAtarSpec, n)
			l, err := NewLearner(minAtarSpec, cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, _, err := l.Update(batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
