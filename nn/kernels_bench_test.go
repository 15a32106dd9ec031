package nn

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
)

// benchKernels are the kernels held against each other in one run: this
// build's native ones; the same with OpenBLAS on its Prescott (SSE3)
// kernels, its fallback for a CPU it does not know, which distrl replaces
// (openblas_core.c); the native ones with every dense layer a GEMM, as
// before dense.c; and the pure-Go ones every build had before OpenBLAS
// (gonum's BLAS, tanh32 a value at a time).
var benchKernels = []struct {
	name string
	k    *kernels
	core string // the OpenBLAS core to run them on; "": the one chosen
}{{"native", &nativeKernels, ""}, {"prescott", &nativeKernels, "Prescott"}, {"gemm", &gemmKernels, ""}, {"gonum", &goKernels, ""}}

// gemmKernels are the native kernels without dense.c's small layers.
var gemmKernels = func() kernels {
	k := nativeKernels
	k.dense = nil
	return k
}()

// benchNets are CartPole's MLP (the default policy of every CartPole
// experiment), a wide one, the size of a pixel task's dense layers, and
// the MinAtar paper's convolutional network (10×10×4 observations, 16
// 3×3 filters, a dense layer of 128, six actions), each at the batches
// it runs at: an actor's 1 (MinAtar only, the network an inline actor
// evaluates per step) or its ring's 8 (CartPole's), a vectorised actor's 64, a policy worker's or
// learner's 512 and a large learner batch of 4096.
var benchNets = []struct {
	name    string
	spec    Spec
	batches []int
}{
	{"cartpole", Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: Tanh, Head: Categorical, ActionDim: 2}, []int{8, 64, 512, 4096}},
	{"512x512", Spec{ObsDim: 64, Hidden: []int{512, 512}, Activation: Tanh, Head: Categorical, ActionDim: 6}, []int{64, 512, 4096}},
	{"minatar", Spec{ObsDim: 400, InputShape: []int{10, 10, 4}, Conv: []ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}},
		Hidden: []int{128}, Activation: ReLU, Head: Categorical, ActionDim: 6, SharedTrunk: true}, []int{1, 64, 512}},
}

// onOneCore runs f with GOMAXPROCS 1, so that the figures are per core:
// gonum would otherwise spread a large product over every core.
func onOneCore(f func()) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	f()
}

// BenchmarkForwardKernels is the forward pass on one core in rows/s, for
// every network of benchNets at its batches, on the native kernels and on
// gonum's.
func BenchmarkForwardKernels(b *testing.B) {
	benchKernelsOn(b, false)
}

// BenchmarkTrainKernels is a learner's step on one core, forward and
// backward, in rows/s, as BenchmarkForwardKernels.
func BenchmarkTrainKernels(b *testing.B) {
	benchKernelsOn(b, true)
}

func benchKernelsOn(b *testing.B, backward bool) {
	for _, kc := range benchKernels {
		for _, net := range benchNets {
			for _, batch := range net.batches {
				b.Run("kernels="+kc.name+"/net="+net.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
					if kc.core != "" {
						restore, ok := useOpenBLASCore(kc.core)
						defer restore()
						if !ok {
							b.Skipf("OpenBLAS cannot run its %s kernels here", kc.core)
						}
					}
					active = *kc.k
					defer func() { active = nativeKernels }()
					m, err := NewActorCritic(net.spec, 1)
					if err != nil {
						b.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(1, 2))
					obs := normals(rng, batch*net.spec.ObsDim)
					dOut := &Output{Logits: normals(rng, batch*net.spec.ActionDim), Values: normals(rng, batch)}
					grad := make([]float32, m.NumParams())
					var ws Workspace
					var out Output
					onOneCore(func() {
						for b.Loop() {
							if err := m.Forward(obs, batch, &ws, &out); err != nil {
								b.Fatal(err)
							}
							if backward {
								if err := m.Backward(&ws, batch, dOut, grad); err != nil {
									b.Fatal(err)
								}
							}
						}
					})
					b.ReportMetric(float64(b.N)*float64(batch)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		}
	}
}

// normals returns n standard normal float32s from rng.
func normals(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// BenchmarkTanh is the forward pass's tanh over 8192 values (CartPole's two
// hidden layers at a vectorised actor's batch of 64) of normal
// pre-activations, in values/s, on one core: through the path the kernels
// take (path=native), through each of tanh.c's paths the CPU runs
// (avx512, avx2, and loop, a value at a time, which every CPU without
// AVX-512 took before the AVX2 path), and tanh32 in Go (path=go).
func BenchmarkTanh(b *testing.B) {
	paths := []struct {
		name string
		f    func([]float32)
	}{{"native", nativeKernels.tanh}, {"go", tanhGo}}
	for _, p := range benchPaths() {
		paths = append(paths, struct {
			name string
			f    func([]float32)
		}{p.name, func(y []float32) { tanhOn(y, p.lanes) }})
	}
	x := normals(rand.New(rand.NewPCG(5, 6)), 8192)
	y := make([]float32, len(x))
	for _, p := range paths {
		b.Run("path="+p.name, func(b *testing.B) {
			onOneCore(func() {
				for b.Loop() {
					copy(y, x)
					p.f(y)
				}
			})
			b.ReportMetric(float64(b.N)*float64(len(x))/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// BenchmarkIm2col lowers 56 images of MinAtar's geometry (10×10×4, 3×3
// windows: one chunk of a forward pass) on one core, in windows/s: through
// the path the kernels take (path=native), each of im2col.c's paths the
// CPU runs (avx512, avx2, and loop: memcpy and memset) and lower in Go.
func BenchmarkIm2col(b *testing.B) {
	g := convGeom{inH: 10, inW: 10, inC: 4, k: 3, stride: 1, outH: 8, outW: 8}
	const n = 56
	paths := []struct {
		name string
		f    func(convGeom, []float32, int, []float32)
	}{{"native", nativeKernels.im2col}, {"go", im2colGo}}
	for _, p := range benchPaths() {
		paths = append(paths, struct {
			name string
			f    func(convGeom, []float32, int, []float32)
		}{p.name, elementwise{p.lanes}.im2col})
	}
	x := normals(rand.New(rand.NewPCG(7, 8)), n*g.inSize())
	col := make([]float32, n*g.pixels()*g.cols())
	for _, p := range paths {
		b.Run("path="+p.name, func(b *testing.B) {
			onOneCore(func() {
				for b.Loop() {
					p.f(g, x, n, col)
				}
			})
			b.ReportMetric(float64(b.N)*n*float64(g.pixels())/b.Elapsed().Seconds(), "windows/s")
		})
	}
}

// benchPaths are the paths of the C loops the CPU runs (lanesRun), by the
// names the benchmarks give them (loop: the baseline).
func benchPaths() []struct {
	name  string
	lanes int
} {
	names := map[int]string{16: "avx512", 8: "avx2", 1: "loop"}
	var out []struct {
		name  string
		lanes int
	}
	for _, lanes := range lanesRun() {
		out = append(out, struct {
			name  string
			lanes int
		}{names[lanes], lanes})
	}
	return out
}

// BenchmarkDenseLayer is one dense layer, y = act(x·W + b), on one core,
// in rows/s, at the small batches of an actor's policy and a learner's
// 512: as the forward pass runs it (path=native: dense.c where denseFaster
// says so), through each of dense.c's paths the CPU runs whatever the
// shape (path=avx512, avx2), and as a bias fill, a GEMM of the native
// kernels and an activation (path=gemm). Shapes: CartPole's two hidden layers and its
// policy head, MinAtar's convolution (a row a pixel, its 3x3x4 patch in,
// 16 filters out), a 512x512 MLP's hidden layer, and MinAtar's dense layer.
func BenchmarkDenseLayer(b *testing.B) {
	shapes := []struct {
		name    string
		in, out int
		act     Activation
	}{{"4x64", 4, 64, Tanh}, {"64x64", 64, 64, Tanh}, {"64x2", 64, 2, ""}, {"64x1", 64, 1, ""}, {"128x6", 128, 6, ""}, {"36x16", 36, 16, ReLU}, {"512x512", 512, 512, Tanh}, {"1024x128", 1024, 128, ReLU}}
	type path struct {
		name string
		run  func(x, w, bias, y []float32, batch, in, out int, act Activation)
	}
	paths := []path{{"gemm", denseGEMM}, {"native", func(x, w, bias, y []float32, batch, in, out int, act Activation) {
		if !nativeKernels.dense(x, w, bias, y, batch, in, out, act) {
			denseGEMM(x, w, bias, y, batch, in, out, act)
		}
	}}}
	for _, p := range benchPaths() {
		if p.lanes > 1 {
			e := elementwise{p.lanes}
			paths = append(paths, path{p.name, func(x, w, bias, y []float32, batch, in, out int, act Activation) {
				e.denseOn(x, w, bias, y, batch, in, out, act)
			}})
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range shapes {
		w, bias := normals(rng, s.in*s.out), normals(rng, s.out)
		for _, batch := range []int{1, 8, 32, 512} {
			x, y := normals(rng, batch*s.in), make([]float32, batch*s.out)
			for _, p := range paths {
				b.Run(s.name+"/batch="+strconv.Itoa(batch)+"/path="+p.name, func(b *testing.B) {
					onOneCore(func() {
						for b.Loop() {
							p.run(x, w, bias, y, batch, s.in, s.out, s.act)
						}
					})
					b.ReportMetric(float64(b.N)*float64(batch)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		}
	}
}
