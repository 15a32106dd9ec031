//go:build !noopenblas

package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// agree reports whether got and want agree to float32 rounding of sums of
// length k: an absolute 1e-6 per term of scale, or 1e-5 relative.
func agree(got, want []float32, k int) error {
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if d := math.Abs(g - w); d > 1e-5*math.Abs(w) && d > 1e-6*float64(k) {
			return fmt.Errorf("element %d: %v, gonum says %v", i, g, w)
		}
	}
	return nil
}

// runnableCores are the OpenBLAS cores whose kernels this CPU can run, of
// those distrl chooses between (openblas_core.c).
func runnableCores() []string {
	cores := []string{"Prescott"}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		cores = append(cores, "Haswell")
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512CD && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL {
		cores = append(cores, "SkylakeX")
	}
	return cores
}

// TestOpenBLASAgreesWithGonum: every BLAS call the passes make, as they make
// them (row-major, strided columns of W for the heads), at random shapes
// including 1s and odd sizes, gives gonum's results, on the kernels of
// every OpenBLAS core this CPU runs.
func TestOpenBLASAgreesWithGonum(t *testing.T) {
	onEveryCore(t, openBLASAgreesWithGonum)
}

// onEveryCore runs test on the kernels of every OpenBLAS core this CPU
// runs, each a subtest, and checks that the chosen core runs after.
func onEveryCore(t *testing.T, test func(t *testing.T)) {
	// Where the machine names a core, other kernels may compute wrong
	// results or crash on its processor: only that core's run.
	if set := os.Getenv("OPENBLAS_CORETYPE"); set != "" {
		t.Logf("OPENBLAS_CORETYPE=%s: only its kernels run", set)
		test(t)
		return
	}
	for _, core := range runnableCores() {
		t.Run(core, func(t *testing.T) {
			restore, ok := useOpenBLASCore(core)
			defer restore()
			if !ok {
				t.Skipf("OpenBLAS cannot switch to its %s kernels", core)
			}
			test(t)
		})
	}
	if got := openBLASCoreNow(); !strings.EqualFold(got, blasCore) {
		t.Errorf("after the switches OpenBLAS runs %s, not %s", got, blasCore)
	}
}

func openBLASAgreesWithGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 { return normals(rng, n) }
	var ob openBLAS
	var gn gonum.Implementation
	dims := []int{1, 2, 3, 7, 64, 65, 129, 513}
	for range 60 {
		m, n, k := dims[rng.IntN(len(dims))], dims[rng.IntN(len(dims))], dims[rng.IntN(len(dims))]
		name := fmt.Sprintf("%dx%dx%d", m, n, k)
		for _, tt := range []struct{ tA, tB blas.Transpose }{{blas.NoTrans, blas.NoTrans}, {blas.Trans, blas.NoTrans}, {blas.NoTrans, blas.Trans}} {
			a, b, c := fill(m*k), fill(k*n), fill(m*n)
			lda, ldb := k, n
			if tt.tA == blas.Trans {
				lda = m
			}
			if tt.tB == blas.Trans {
				ldb = k
			}
			got, want := slices.Clone(c), slices.Clone(c)
			ob.Sgemm(tt.tA, tt.tB, m, n, k, 1, a, lda, b, ldb, 0.5, got, n)
			gn.Sgemm(tt.tA, tt.tB, m, n, k, 1, a, lda, b, ldb, 0.5, want, n)
			if err := agree(got, want, k); err != nil {
				t.Fatalf("Sgemm %v%v %s: %v", tt.tA, tt.tB, name, err)
			}
		}
		// A column of W ([k, n], row-major) as the passes use it: stride n.
		a, w := fill(m*k), fill(k*n)
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			rows, cols := m, k
			x, y := w, fill(m*n)
			if tA == blas.Trans {
				x, y = fill(m*n), fill(k*n)
			}
			got, want := slices.Clone(y), slices.Clone(y)
			ob.Sgemv(tA, rows, cols, 1, a, k, x, n, 1, got, n)
			gn.Sgemv(tA, rows, cols, 1, a, k, x, n, 1, want, n)
			if err := agree(got, want, max(rows, cols)); err != nil {
				t.Fatalf("Sgemv %v %s: %v", tA, name, err)
			}
		}
		x, y, c := fill(m*n), fill(k*n), fill(m*k)
		got, want := slices.Clone(c), slices.Clone(c)
		ob.Sger(m, k, 1, x, n, y, n, got, k)
		gn.Sger(m, k, 1, x, n, y, n, want, k)
		if err := agree(got, want, 1); err != nil {
			t.Fatalf("Sger %s: %v", name, err)
		}
		got, want = slices.Clone(c), slices.Clone(c)
		ob.Sscal(len(got), 0.25, got, 1)
		gn.Sscal(len(want), 0.25, want, 1)
		if err := agree(got, want, 1); err != nil {
			t.Fatalf("Sscal %s: %v", name, err)
		}
	}
}

// TestNetworkOpenBLASAgreesWithGonum: the forward pass and the gradients
// of whole networks (both heads, shared trunks, odd widths, batch 1) on
// the native kernels (OpenBLAS, the vectorised tanh) are those of the
// pure-Go kernels (gonum, tanh32), to float32 rounding, on every OpenBLAS
// core this CPU runs.
func TestNetworkOpenBLASAgreesWithGonum(t *testing.T) {
	onEveryCore(t, networkOpenBLASAgreesWithGonum)
}

func networkOpenBLASAgreesWithGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fill := func(n int) []float32 { return normals(rng, n) }
	specs := []Spec{
		{ObsDim: 4, Hidden: []int{64, 64}, Activation: Tanh, Head: Categorical, ActionDim: 2},
		{ObsDim: 17, Hidden: []int{33, 7}, Activation: ReLU, Head: Gaussian, ActionDim: 3},
		{ObsDim: 5, Hidden: []int{129}, Activation: Tanh, Head: Categorical, ActionDim: 6, SharedTrunk: true},
		{ObsDim: 9, Hidden: []int{256, 65}, Activation: ReLU, Head: Categorical, ActionDim: 18},
		// Convolutions: MinAtar's network, and a strided, padded stack with a
		// 1×1 layer and a Gaussian head on a large enough image that a
		// batch of 130 spans several im2col chunks.
		{ObsDim: 400, InputShape: []int{10, 10, 4}, Conv: []ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}},
			Hidden: []int{128}, Activation: ReLU, Head: Categorical, ActionDim: 6, SharedTrunk: true},
		{ObsDim: 1200, InputShape: []int{20, 20, 3}, Conv: []ConvLayer{{Filters: 8, Kernel: 5, Stride: 2, Padding: 2},
			{Filters: 6, Kernel: 1, Stride: 1}, {Filters: 4, Kernel: 3, Stride: 2}}, Hidden: []int{33}, Activation: Tanh, Head: Gaussian, ActionDim: 3},
	}
	t.Cleanup(func() { active = nativeKernels })
	for _, spec := range specs {
		for _, batch := range []int{1, 3, 64, 130} {
			m, err := NewActorCritic(spec, 9)
			if err != nil {
				t.Fatal(err)
			}
			obs := fill(batch * spec.ObsDim)
			run := func(k kernels) (Output, []float32) {
				active = k
				var ws Workspace
				var out Output
				if err := m.Forward(obs, batch, &ws, &out); err != nil {
					t.Fatal(err)
				}
				d := Output{Logits: slices.Clone(out.Logits), Mean: slices.Clone(out.Mean), Values: slices.Clone(out.Values)}
				if len(out.LogStd) > 0 {
					d.LogStd = slices.Clone(out.LogStd)
				}
				grad := make([]float32, m.NumParams())
				if err := m.Backward(&ws, batch, &d, grad); err != nil {
					t.Fatal(err)
				}
				return out, grad
			}
			outG, gradG := run(goKernels)
			outO, gradO := run(nativeKernels)
			widest := slices.Max(append([]int{spec.ObsDim, batch, m.features}, spec.Hidden...))
			for _, l := range m.conv {
				widest = max(widest, l.cols())
			}
			for _, p := range []struct {
				what      string
				got, want []float32
			}{
				{"logits", outO.Logits, outG.Logits}, {"mean", outO.Mean, outG.Mean},
				{"values", outO.Values, outG.Values}, {"gradient", gradO, gradG},
			} {
				if err := agree(p.got, p.want, widest); err != nil {
					t.Errorf("%v batch %d: %s: %v", spec, batch, p.what, err)
				}
			}
		}
	}
}

// TestOpenBLASCore: on a CPU with AVX2 and FMA the networks never run on
// OpenBLAS's Prescott (SSE3) kernels, its fallback for a CPU it does not
// know, and a core named by OPENBLAS_CORETYPE is left as the user chose it
// (in a child process: the library reads the variable when it loads).
func TestOpenBLASCore(t *testing.T) {
	if os.Getenv("DISTRL_TEST_OPENBLAS_CHILD") == "1" {
		name, chosen := BLASCore()
		fmt.Printf("core=%s chosen=%v\n", name, chosen)
		return
	}
	name, chosen := BLASCore()
	t.Logf("OpenBLAS core %s (chosen by the CPU's features: %v)", name, chosen)
	if set := os.Getenv("OPENBLAS_CORETYPE"); set != "" {
		if !strings.EqualFold(name, set) || chosen {
			t.Errorf("OPENBLAS_CORETYPE=%s, and OpenBLAS runs %s (chosen by features: %v)", set, name, chosen)
		}
		return // the machine's choice stands; no child chooses another
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && strings.EqualFold(name, "prescott") {
		t.Errorf("OpenBLAS runs its Prescott kernels on a CPU with AVX2 and FMA")
	}
	for _, core := range runnableCores() {
		if strings.EqualFold(core, name) {
			continue // a child that names the core chosen here says nothing more
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestOpenBLASCore$")
		cmd.Env = append(os.Environ(), "DISTRL_TEST_OPENBLAS_CHILD=1", "OPENBLAS_CORETYPE="+core)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with OPENBLAS_CORETYPE=%s: %v\n%s", core, err, out)
		}
		if want := "core=" + core + " chosen=false"; !strings.Contains(strings.ToLower(string(out)), strings.ToLower(want)) {
			t.Errorf("OPENBLAS_CORETYPE=%s: the child says %q, want %q", core, out, want)
		}
	}
}

// TestSIMDPathsMatchCPU: the kernels take the widest vector path the CPU
// has (simd.c once read __builtin_cpu_supports's feature bit as a no, and
// every AVX-512 CPU ran the AVX2 paths).
func TestSIMDPathsMatchCPU(t *testing.T) {
	for _, c := range []struct {
		lanes int
		has   bool
	}{{16, cpu.X86.HasAVX512F}, {8, cpu.X86.HasAVX2 && cpu.X86.HasFMA}, {1, true}} {
		if got := simdRuns(c.lanes); got != c.has {
			t.Errorf("simdRuns(%d) = %v, the CPU says %v", c.lanes, got, c.has)
		}
	}
	want := 1
	if cpu.X86.HasAVX512F {
		want = 16
	} else if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		want = 8
	}
	if simdLanes != want {
		t.Errorf("the kernels take %d lanes, want %d", simdLanes, want)
	}
}
