package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The native kernels' Adam loop (C, vectorised), through every vector path
// the CPU runs, computes exactly what the Go loop does, bit for bit, over
// lengths that leave every kind of tail, with moments and gradients from
// tiny to huge, zeros, and NaN.
func TestAdamNativeMatchesGo(t *testing.T) {
	paths := []struct {
		name string
		f    func(params, m, v, grad []float32, s adamStep)
	}{{"native", nativeKernels.adam}}
	for _, lanes := range simdPaths {
		if simdRuns(lanes) {
			paths = append(paths, struct {
				name string
				f    func(params, m, v, grad []float32, s adamStep)
			}{fmt.Sprint("lanes=", lanes), func(params, m, v, grad []float32, s adamStep) { adamOn(params, m, v, grad, s, lanes) }})
		}
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testAdamMatchesGo(t, path.f) })
	}
}

func testAdamMatchesGo(t *testing.T, adam func(params, m, v, grad []float32, s adamStep)) {
	rng := rand.New(rand.NewPCG(5, 6))
	value := func() float32 {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return float32(rng.NormFloat64() * 1e-20)
		case 2:
			return float32(rng.NormFloat64() * 1e20)
		default:
			return float32(rng.NormFloat64())
		}
	}
	for _, n := range []int{vecAdamMin, vecAdamMin + 1, 1000, 4099, 150_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			vecs := make([][]float32, 4) // params, m, v, grad
			for i := range vecs {
				vecs[i] = make([]float32, n)
				for j := range vecs[i] {
					vecs[i][j] = value()
				}
			}
			for j := range vecs[2] {
				vecs[2][j] = float32(math.Abs(float64(vecs[2][j]))) // v >= 0
			}
			vecs[3][n/2] = float32(math.NaN())
			cp := func() [][]float32 {
				out := make([][]float32, len(vecs))
				for i, v := range vecs {
					out[i] = append([]float32(nil), v...)
				}
				return out
			}
			s := adamStep{b1: 0.9, b2: 0.999, stepSize: 3e-4 / (1 - 0.9*0.9), invSqrtC2: float32(1 / math.Sqrt(1-0.999*0.999)), eps: 1e-8}
			want, got := cp(), cp()
			for range 3 { // the moments of one step feed the next
				adamGo(want[0], want[1], want[2], want[3], s)
				adam(got[0], got[1], got[2], got[3], s)
			}
			for i, name := range []string{"params", "m", "v"} {
				for j := range want[i] {
					w, g := want[i][j], got[i][j]
					if math.Float32bits(w) != math.Float32bits(g) && !(w != w && g != g) {
						t.Fatalf("%s[%d]: native %v (%#x), Go %v (%#x)", name, j, g, math.Float32bits(g), w, math.Float32bits(w))
					}
				}
			}
			if p := got[0][n/2]; p == p {
				t.Errorf("a NaN gradient left its parameter %v", p)
			}
		})
	}
}

// BenchmarkAdam is one Adam step over MinAtar's network's parameters
// (about 150k), on the native kernels, on Go's loop, and through each
// vector path of adam.c the CPU runs (lanes=16: AVX-512, lanes=8: AVX2).
func BenchmarkAdam(b *testing.B) {
	const n = 150_000
	type variant struct {
		name string
		k    kernels
	}
	var variants []variant
	for _, kc := range benchKernels {
		if kc.core == "" { // Adam's loop is distrl's own, whatever OpenBLAS runs
			variants = append(variants, variant{"kernels=" + kc.name, *kc.k})
		}
	}
	// Each vector path the CPU runs (the native kernels take the widest).
	for _, lanes := range simdPaths {
		if simdRuns(lanes) {
			k := nativeKernels
			k.adam = func(params, m, v, grad []float32, s adamStep) { adamOn(params, m, v, grad, s, lanes) }
			variants = append(variants, variant{fmt.Sprint("lanes=", lanes), k})
		}
	}
	for _, kc := range variants {
		b.Run(kc.name, func(b *testing.B) {
			a := NewAdam(n, 3e-4)
			params, grad := make([]float32, n), make([]float32, n)
			for i := range grad {
				grad[i] = float32(i%7) - 3
			}
			prev := active
			active = kc.k
			defer func() { active = prev }()
			for b.Loop() {
				if err := a.Update(params, grad); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mparams/s")
		})
	}
}
