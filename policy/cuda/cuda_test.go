//go:build cuda || cudaemu

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/cudainit"
	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policy/cuda"
)

// These tests need an NVIDIA GPU: without one each says SKIP with the
// driver's reason (requireGPU). One command runs them all on a lent
// machine:
//
//	bin/device/run policy_cuda.test -test.v

// nets are the shapes the equivalence tests cover: CartPole's, a wide ReLU
// network with more actions than dense_narrow takes, a shared trunk with
// odd widths, a Gaussian head, and a linear policy.
var nets = []struct {
	name string
	cfg  policy.Config
}{
	{"cartpole-64x64", policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Hidden: []int{64, 64}}},
	{"relu-512x512-18", policy.Config{ObsDim: 100, ActionDim: 18, Head: nn.Categorical, Hidden: []int{512, 512}, Activation: nn.ReLU}},
	{"shared-33x17-5", policy.Config{ObsDim: 7, ActionDim: 5, Head: nn.Categorical, Hidden: []int{33, 17}, SharedTrunk: true}},
	{"gaussian-64x64-3", policy.Config{ObsDim: 11, ActionDim: 3, Head: nn.Gaussian, Hidden: []int{64, 64}}},
	{"linear-3", policy.Config{ObsDim: 5, ActionDim: 3, Head: nn.Categorical, Hidden: []int{}}},
	{"minatar-conv", policy.Config{ObsDim: 400, ObsShape: []int{10, 10, 4}, Conv: policy.MinAtarConv, ActionDim: 6,
		Head: nn.Categorical, Hidden: []int{128}, Activation: nn.ReLU, SharedTrunk: true}},
	{"conv-pad-stride", policy.Config{ObsDim: 490, ObsShape: []int{10, 7, 7}, ActionDim: 5, Head: nn.Categorical,
		Conv: []nn.ConvLayer{{Filters: 8, Kernel: 3, Stride: 1, Padding: 1}, {Filters: 12, Kernel: 3, Stride: 2}}, Hidden: []int{32}}},
}

// requireGPU skips a test where the CUDA driver did not initialise, with
// its reason.
func requireGPU(t testing.TB) {
	t.Helper()
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
}

var batches = enginetest.DeviceSizes(1, 2, 7, 64, 513, 4096, 8192)

// pair builds the same policy on the CPU and on GPU 0, with parameters
// drawn from seed (far from the initial near-uniform heads, so that
// actions differ between rows).
func pair(t testing.TB, cfg policy.Config, seed uint64) (cpu, gpu *policy.ActorCritic) {
	t.Helper()
	requireGPU(t)
	cpu, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err = policy.NewOn(cfg, cuda.Opener(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gpu.Close(); err != nil {
			t.Error(err)
		}
	})
	setRandomParams(t, seed, cpu, gpu)
	return cpu, gpu
}

// The weights of a layer [in, out] are N(0, (1.5/sqrt(in))²), so that
// activations stay of order 1 through 512-wide layers (a value is then not
// a sum of large terms that cancel, whose float32 rounding depends on the
// order of the sum, which differs between OpenBLAS, gonum and our kernels)
// while the heads' logits spread the rows' actions; biases N(0, 0.1²),
// log-stds N(0, 0.3²).
func setRandomParams(t testing.TB, seed uint64, ps ...*policy.ActorCritic) {
	t.Helper()
	_, params := ps[0].Params()
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, info := range ps[0].Net().Layout() {
		scale := 0.1
		switch {
		case len(info.Shape) == 2:
			scale = 1.5 / math.Sqrt(float64(info.Shape[0]))
		case len(info.Shape) == 4: // a convolution's [k, k, cin, filters]
			scale = 1.5 / math.Sqrt(float64(info.Shape[0]*info.Shape[1]*info.Shape[2]))
		case info.Name == "logstd":
			scale = 0.3
		}
		for i := info.Offset; i < info.Offset+info.Size(); i++ {
			params[i] = float32(rng.NormFloat64() * scale)
		}
	}
	for _, p := range ps {
		if err := p.SetParams(int64(seed), params); err != nil {
			t.Fatal(err)
		}
	}
}

func randObs(seed uint64, batch, dim int) api.Tensor[float32] {
	rng := rand.New(rand.NewPCG(seed, 1))
	o := api.NewTensor[float32](batch, dim)
	for i := range o.Data {
		o.Data[i] = float32(rng.NormFloat64())
	}
	return o
}

// close reports whether got is within 1e-4 of want, relative to want's
// magnitude (absolute below 1).
func closeTo(got, want float32) bool {
	return math.Abs(float64(got-want)) <= 1e-4*max(1, math.Abs(float64(want)))
}

// TestEquivalence: for every shape and batch size, the GPU gives the CPU's
// values, greedy actions, their log-probabilities and Gaussian means within
// 1e-4 relative, and, sampling with the same seed, the same actions.
func TestEquivalence(t *testing.T) {
	requireGPU(t)
	for _, net := range nets {
		for _, batch := range batches {
			t.Run(fmt.Sprintf("%s/batch=%d", net.name, batch), func(t *testing.T) {
				for _, deterministic := range []bool{true, false} {
					cfg := net.cfg
					cfg.Deterministic, cfg.Seed = deterministic, 11
					cpu, gpu := pair(t, cfg, uint64(batch))
					for round := range 2 { // the second after new parameters
						if round == 1 {
							setRandomParams(t, uint64(batch)+100, cpu, gpu)
						}
						obs := randObs(uint64(batch*10+round), batch, cfg.ObsDim)
						var want, got api.Inference
						if err := cpu.Infer(obs, &want); err != nil {
							t.Fatal(err)
						}
						if err := gpu.Infer(obs, &got); err != nil {
							t.Fatal(err)
						}
						compare(t, cfg, &want, &got, logitScales(t, cpu, obs))
					}
				}
			})
		}
	}
}

// logitScales is, per row, the largest logit's magnitude (at least 1) on
// the CPU: log p(a) = l_a - logsumexp(l) carries the logits' rounding, so
// "logits within 1e-4 relative" bounds its error by 1e-4 of this scale.
func logitScales(t *testing.T, p *policy.ActorCritic, obs api.Tensor[float32]) []float64 {
	t.Helper()
	var ws nn.Workspace
	var fwd nn.Output
	batch := obs.Shape[0]
	if err := p.Net().Forward(obs.Data, batch, &ws, &fwd); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, batch)
	if len(fwd.Logits) == 0 {
		for i := range out {
			out[i] = 1
		}
		return out
	}
	a := len(fwd.Logits) / batch
	for i := range out {
		out[i] = 1
		for _, l := range fwd.Logits[i*a : (i+1)*a] {
			out[i] = max(out[i], math.Abs(float64(l)))
		}
	}
	return out
}

func compare(t *testing.T, cfg policy.Config, want, got *api.Inference, scales []float64) {
	t.Helper()
	if got.Version != want.Version {
		t.Errorf("version %d, want %d", got.Version, want.Version)
	}
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	for i, v := range want.Values.Data {
		if !closeTo(got.Values.Data[i], v) {
			report("row %d: value %v, want %v", i, got.Values.Data[i], v)
		}
	}
	if cfg.Head == nn.Gaussian {
		for i, v := range want.ContActions.Data {
			// Deterministic: the mean. Sampling: mean + std·z with the same z.
			if !closeTo(got.ContActions.Data[i], v) {
				report("element %d: action %v, want %v", i, got.ContActions.Data[i], v)
			}
		}
	} else {
		// Actions may differ only where the CPU's own numbers are a
		// rounding away from choosing the other one; each such row is
		// counted, and too many fail.
		differ := 0
		for i, a := range want.Actions.Data {
			if got.Actions.Data[i] != a {
				differ++
			}
		}
		if limit := len(want.Actions.Data)/1000 + 1; differ > limit {
			report("%d of %d actions differ (at most %d may, by rounding)", differ, len(want.Actions.Data), limit)
		} else if differ > 0 {
			t.Logf("%d of %d actions differ (rounding at a boundary)", differ, len(want.Actions.Data))
		}
		for i, lp := range want.LogProbs.Data {
			if got.Actions.Data[i] == want.Actions.Data[i] && math.Abs(float64(got.LogProbs.Data[i]-lp)) > 1e-4*scales[i] {
				report("row %d: log-probability %v, want %v (logits up to %v)", i, got.LogProbs.Data[i], lp, scales[i])
			}
		}
	}
	if cfg.Head == nn.Gaussian {
		for i, lp := range want.LogProbs.Data {
			if !closeTo(got.LogProbs.Data[i], lp) {
				report("row %d: log-probability %v, want %v", i, got.LogProbs.Data[i], lp)
			}
		}
	}
}

// TestSamplingBoundaries drives the backend with draws of its own and
// checks every sampled action against the CPU's inverse CDF over the CPU's
// logits: a differing action is allowed only where the draw lies within
// 1e-5 of the cumulative probability that separates the two.
func TestSamplingBoundaries(t *testing.T) {
	requireGPU(t)
	cfg := policy.Config{ObsDim: 9, ActionDim: 6, Head: nn.Categorical, Hidden: []int{64, 64}, Seed: 3}
	cpu, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	setRandomParams(t, 5, cpu)
	net := cpu.Net()
	b, err := cuda.Open(0, net)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const batch = 8192
	obs := randObs(9, batch, cfg.ObsDim)
	draws := make([]float64, batch)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range draws {
		draws[i] = rng.Float64()
	}
	out := policy.Acted{Actions: make([]int32, batch), LogProbs: make([]float32, batch), Values: make([]float32, batch)}
	if err := b.Act(obs.Data, batch, draws, &out); err != nil {
		t.Fatal(err)
	}
	var ws nn.Workspace
	var fwd nn.Output
	if err := net.Forward(obs.Data, batch, &ws, &fwd); err != nil {
		t.Fatal(err)
	}
	a := cfg.ActionDim
	differ := 0
	for i := range batch {
		logits := fwd.Logits[i*a : (i+1)*a]
		want, _ := nn.SampleCategoricalWith(logits, a, draws[i])
		if out.Actions[i] == want {
			continue
		}
		differ++
		lo, hi := min(want, out.Actions[i]), max(want, out.Actions[i])
		// The boundary between lo and its successor lies at cdf(lo).
		var cdf float64
		lse := 0.0
		mx := math.Inf(-1)
		for _, v := range logits {
			mx = max(mx, float64(v))
		}
		for _, v := range logits {
			lse += math.Exp(float64(v) - mx)
		}
		lse = mx + math.Log(lse)
		for j := int32(0); j <= lo; j++ {
			cdf += math.Exp(float64(logits[j]) - lse)
		}
		if hi != lo+1 || math.Abs(cdf-draws[i]) > 1e-5 {
			t.Errorf("row %d: action %d, want %d with draw %v (cdf at %d is %v)", i, out.Actions[i], want, draws[i], lo, cdf)
		}
	}
	t.Logf("%d of %d sampled actions differ, each at a boundary", differ, batch)
}

// TestNonFiniteRows: a row whose observation is NaN gets action -1 and a
// NaN log-probability from the kernel; the policy refuses the batch as the
// CPU policy does.
func TestNonFiniteRows(t *testing.T) {
	cfg := nets[0].cfg
	cpu, gpu := pair(t, cfg, 1)
	obs := randObs(3, 8, cfg.ObsDim)
	obs.Data[5*cfg.ObsDim] = float32(math.NaN())
	var out api.Inference
	for _, p := range []*policy.ActorCritic{cpu, gpu} {
		if err := p.Infer(obs, &out); !errors.Is(err, policy.ErrNoValidAction) {
			t.Errorf("Infer with a NaN row: %v, want ErrNoValidAction", err)
		}
	}
}

// TestOpenBadDevice: a device beyond those present is ErrDevice, named;
// without a driver, so is every device.
func TestOpenBadDevice(t *testing.T) {
	p, err := policy.New(nets[0].cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cuda.Open(99, p.Net())
	if !errors.Is(err, cuda.ErrDevice) {
		t.Fatalf("Open(99): %v, want ErrDevice", err)
	}
	t.Log(err)
}

// TestDevices lists the GPUs, as `rlctl-cuda devices` prints them.
func TestDevices(t *testing.T) {
	requireGPU(t)
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		t.Fatalf("Devices: %v, %v", ds, err)
	}
	for _, d := range ds {
		t.Log(d)
	}
}
