package nn

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The native kernels' Adam loop (C, vectorised) computes exactly what the
// Go loop does, bit for bit, over lengths that leave every kind of tail,
// with moments and gradients from tiny to huge, zeros, and NaN.
func TestAdamNativeMatchesGo(t *testing.T) {
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
				nativeKernels.adam(got[0], got[1], got[2], got[3], s)
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
// (about 150k), on the native kernels and on Go's loop.
func BenchmarkAdam(b *testing.B) {
	const n = 150_000
	for _, kc := range benchKernels {
		if kc.core != "" { // Adam's loop is distrl's own, whatever OpenBLAS runs
			continue
		}
		b.Run("kernels="+kc.name, func(b *testing.B) {
			a := NewAdam(n, 3e-4)
			params, grad := make([]float32, n), make([]float32, n)
			for i := range grad {
				grad[i] = float32(i%7) - 3
			}
			prev := active
			active = *kc.k
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
