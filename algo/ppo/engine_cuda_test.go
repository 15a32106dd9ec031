//go:build cuda || cudaemu

package ppo

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/cudainit"
	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/nn/cuda"
)

// twoConv stacks a padded convolution on a strided one, so that the
// gradient flows through a convolution's input (dense_dgrad into the
// patches, col2im into the image), which one convolution never needs.
var twoConv = nn.Spec{ObsDim: 490, InputShape: []int{10, 7, 7}, Conv: []nn.ConvLayer{{Filters: 8, Kernel: 3, Stride: 1, Padding: 1},
	{Filters: 12, Kernel: 3, Stride: 2}}, Hidden: []int{32}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 5}

// mlp512 is a 512x512 MLP with more actions than a narrow head.
var mlp512 = nn.Spec{ObsDim: 100, Hidden: []int{512, 512}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 18}

// TestCUDAEngine: on GPU 0, the PPO loss's gradient is the CPU's within
// 1e-4 relative (or the CPU's own rounding across float32 paths: see
// roundingFloor) for minibatches of 1 to 8192 rows, 20 Adam steps end
// within 1e-3, and checkpoints move between the GPU and the CPU.
func TestCUDAEngine(t *testing.T) {
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
	specs := map[string]nn.Spec{"minatar": minAtarSpec, "mlp-512x512": mlp512, "tiny-image": tinyImage, "two-conv": twoConv}
	checkEngineGradients(t, cuda.EngineOpener(0), specs, enginetest.DeviceSizes(1, 7, 64, 512, 4096, 8192), 1e-4)
	for name, spec := range specs {
		t.Run("updates/"+name, func(t *testing.T) { checkEngineUpdates(t, cuda.EngineOpener(0), spec, 5, 1e-3) })
		// The same updates one step at a time (the outputs, their
		// gradient and the norm crossing every minibatch, the loss here).
		t.Run("updates-stepwise/"+name, func(t *testing.T) { checkEngineUpdates(t, enginetest.Plain(cuda.EngineOpener(0)), spec, 5, 1e-3) })
	}
}

// TestCUDAWholeSteps: the GPU engine takes whole steps (kernels.cu's
// ppo_loss, ppo_sums, surrogate_guard, adam_guarded): the CPU learner's
// stats and parameters within 1e-3, TargetKL's early stop, and a
// non-finite step stopped where the CPU stops, nothing after it applied.
func TestCUDAWholeSteps(t *testing.T) {
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
	checkWholeSteps(t, cuda.EngineOpener(0), 1e-3)
	t.Run("non-finite", func(t *testing.T) { checkWholeStepsStopAtNonFinite(t, cuda.EngineOpener(0), 1e-3) })
}

// BenchmarkUpdateMinAtar is a PPO update of minatar-breakout-ppo-cuda's
// size (8192 samples of MinAtar's network, 4 epochs of minibatches of 512)
// on the CPU learner (with 1, 4 and GOMAXPROCS threads, "cpu-all": its
// best is the baseline) and on GPU 0. samples/s counts each sample once per update.
func BenchmarkUpdateMinAtar(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var batches []*api.SampleBatch
	for range 8192 / 256 {
		batches = append(batches, randBatch(rng, minAtarSpec, batchSpec{t: 256, truncated: []int{255}}))
	}
	// cpu-all: GOMAXPROCS threads (16 on the lent machines).
	// cuda-stepwise: the GPU one minibatch at a time, the loss on the host
	// (what "cuda" did before it took whole steps).
	for _, device := range []string{"cpu-1", "cpu-4", "cpu-all", "cuda", "cuda-stepwise"} {
		b.Run("device="+device, func(b *testing.B) {
			if strings.HasPrefix(device, "cuda") {
				if err := cudainit.Err(); err != nil {
					b.Skip(err)
				}
			}
			cfg := DefaultConfig()
			cfg.MinibatchSize = 512
			l := newLearner(b, minAtarSpec, cfg)
			if threads, ok := strings.CutPrefix(device, "cpu-"); ok {
				n, err := strconv.Atoi(threads)
				if err != nil {
					n = runtime.GOMAXPROCS(0)
				}
				l.SetThreads(n)
			}
			if open := cuda.EngineOpener(0); strings.HasPrefix(device, "cuda") {
				if device == "cuda-stepwise" {
					open = enginetest.Plain(open)
				}
				if err := l.SetEngine(open); err != nil {
					b.Fatal(err)
				}
				defer l.Close()
			}
			if _, err := l.Update(batches); err != nil { // warm: buffers, JIT
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := l.Update(batches); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*8192/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
