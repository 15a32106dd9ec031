//go:build cuda || cudaemu

package cuda_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policy/cuda"
)

// BenchmarkBackend is a policy worker's forward pass, Infer of a batch
// (sampling included), on the CPU backend (package nn on OpenBLAS, with one
// thread and with GOMAXPROCS threads, its best on a machine to itself) and
// on GPU 0, for CartPole's 4-64-64 network, a 512x512 one and MinAtar's
// convolutional network (10x10x4, 16 3x3 filters, 128, 6 actions), at
// batch 64, 512, 4096 and 8192. It reports rows/s; the CUDA runs also the
// GPU's time per batch split into copy-in, kernels and copy-out (a
// profiled pass: the kernels are waited for before the copy out, which
// the serving path does not do), in us.
func BenchmarkBackend(b *testing.B) {
	requireGPU(b)
	nets := []struct {
		name string
		cfg  policy.Config
	}{
		{"64x64", policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Hidden: []int{64, 64}, Seed: 1}},
		{"512x512", policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Hidden: []int{512, 512}, Seed: 1}},
		{"minatar-conv", policy.Config{ObsDim: 400, ObsShape: []int{10, 10, 4}, Conv: policy.MinAtarConv, ActionDim: 6,
			Head: nn.Categorical, Hidden: []int{128}, Activation: nn.ReLU, SharedTrunk: true, Seed: 1}},
	}
	for _, net := range nets {
		for _, batch := range []int{64, 512, 4096, 8192} {
			obs := randObs(3, batch, net.cfg.ObsDim)
			// cpu-all: GOMAXPROCS threads (16 on the lent machines).
			for _, device := range []string{"cpu-1", "cpu-all", "cuda"} {
				cfg := net.cfg
				b.Run(fmt.Sprintf("net=%s/batch=%d/device=%s", net.name, batch, device), func(b *testing.B) {
					var open policy.OpenBackend
					var gpu *cuda.Backend
					if device == "cuda" {
						open = func(net *nn.ActorCritic) (policy.Backend, error) {
							bk, err := cuda.Open(0, net)
							gpu = bk
							return bk, err
						}
					} else if device != "cpu-1" {
						cfg.Threads = runtime.GOMAXPROCS(0)
					}
					p, err := policy.NewOn(cfg, open)
					if err != nil {
						b.Fatal(err)
					}
					defer p.Close()
					var out api.Inference
					if err := p.Infer(obs, &out); err != nil { // warm: buffers, JIT
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						if err := p.Infer(obs, &out); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
					if gpu == nil {
						return
					}
					// The split, over a profiled pass of as many batches.
					gpu.SetProfile(true)
					gpu.ResetTimings()
					for range min(b.N, 200) {
						if err := p.Infer(obs, &out); err != nil {
							b.Fatal(err)
						}
					}
					tm := gpu.Timings()
					per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(tm.Batches) }
					b.ReportMetric(per(tm.CopyIn), "copyin-us")
					b.ReportMetric(per(tm.Kernels), "kernels-us")
					b.ReportMetric(per(tm.CopyOut), "copyout-us")
				})
			}
		}
	}
}
