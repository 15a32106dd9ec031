//go:build cuda

package dqn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/internal/cudainit"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/nn/cuda"
)

// TestCUDAEngine: on GPU 0, the DQN loss's gradient is the CPU's within
// 1e-4 relative for batches of 1 to 8192, 20 Adam steps end within 1e-3,
// and checkpoints move between the GPU and the CPU.
func TestCUDAEngine(t *testing.T) {
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
	minAtar := minAtarSpec
	mlp := nn.Spec{ObsDim: 100, Hidden: []int{512, 512}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 18}
	checkEngine(t, cuda.EngineOpener(0), map[string]nn.Spec{"minatar": minAtar, "mlp-512x512": mlp, "conv": convSpec()},
		[]int{1, 7, 64, 512, 4096, 8192}, 1e-4, 20, 1e-3)
}

// BenchmarkUpdateMinAtar is a DQN update (double, dueling) of MinAtar's
// network on the CPU learner and on GPU 0, at the Ape-X built-ins' batch
// of 64 and at 512. samples/s counts the batch's transitions.
func BenchmarkUpdateMinAtar(b *testing.B) {
	spec := minAtarSpec
	cfg := DefaultConfig()
	cfg.Dueling = true
	for _, n := range []int{64, 512} {
		batch := engineBatch(rand.New(rand.NewPCG(1, 1)), spec, n)
		for _, device := range []string{"cpu", "cuda"} {
			b.Run(fmt.Sprintf("batch=%d/device=%s", n, device), func(b *testing.B) {
				l, err := NewLearner(spec, cfg, 1)
				if err != nil {
					b.Fatal(err)
				}
				if device == "cuda" {
					if err := cudainit.Err(); err != nil {
						b.Skip(err)
					}
					if err := l.SetEngine(cuda.EngineOpener(0)); err != nil {
						b.Fatal(err)
					}
					defer l.Close()
				}
				if _, _, err := l.Update(batch, nil); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if _, _, err := l.Update(batch, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}
