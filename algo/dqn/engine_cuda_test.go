//go:build cuda || cudaemu

package dqn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/internal/cudainit"
	"github.com/distrl/distrl/internal/testsupport/enginetest"
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
	specs := map[string]nn.Spec{"minatar": minAtar, "mlp-512x512": mlp, "conv": convSpec()}
	checkEngine(t, cuda.EngineOpener(0), specs, enginetest.DeviceSizes(1, 7, 64, 512, 4096, 8192), 1e-4, 20, 1e-3)
	// The updates again one step at a time (the outputs, their gradient
	// and the norm crossing, the loss here); the gradients above are that
	// way already.
	t.Run("stepwise", func(t *testing.T) { checkEngine(t, enginetest.Plain(cuda.EngineOpener(0)), specs, nil, 1e-4, 20, 1e-3) })
}

// TestCUDAWholeUpdates: the GPU engine takes whole updates (kernels.cu's
// dqn_loss, term_sums, dqn_guard, adam_guarded): the CPU learner's stats,
// priorities and parameters within 1e-3 over 9 updates with target copies
// or Polyak steps, states restored into it, and a NaN loss refused with
// nothing changed.
func TestCUDAWholeUpdates(t *testing.T) {
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
	checkWholeUpdates(t, cuda.EngineOpener(0), 1e-3)
	t.Run("non-finite", func(t *testing.T) { checkWholeUpdateNonFinite(t, cuda.EngineOpener(0)) })
}

// BenchmarkUpdateMinAtar is a DQN update (double, dueling) of MinAtar's
// network on the CPU learner and on GPU 0, at the Ape-X built-ins' batch
// of 64, the -cuda built-ins' 256 and at 512; on the GPU whole
// ("cuda") and one pass at a time with the loss on the host
// ("cuda-stepwise", as before it took whole updates). samples/s counts
// the batch's transitions.
func BenchmarkUpdateMinAtar(b *testing.B) {
	spec := minAtarSpec
	cfg := DefaultConfig()
	cfg.Dueling = true
	for _, n := range []int{64, 256, 512} {
		batch := engineBatch(rand.New(rand.NewPCG(1, 1)), spec, n)
		for _, device := range []string{"cpu", "cuda", "cuda-stepwise"} {
			b.Run(fmt.Sprintf("batch=%d/device=%s", n, device), func(b *testing.B) {
				l, err := NewLearner(spec, cfg, 1)
				if err != nil {
					b.Fatal(err)
				}
				if open := cuda.EngineOpener(0); device != "cpu" {
					if err := cudainit.Err(); err != nil {
						b.Skip(err)
					}
					if device == "cuda-stepwise" {
						open = enginetest.Plain(open)
					}
					if err := l.SetEngine(open); err != nil {
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
