package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDenseMatchesGEMM: every path of dense.c the CPU runs computes a dense
// layer as the GEMM does, to float32 rounding, for every activation, at
// the row counts of its row blocks and their remainders, and at widths
// that end a column block exactly, leave a partial vector, or leave whole
// vectors of the last block empty. The yardstick is gonum's GEMM: each
// value within a few roundings of its sum's magnitude (Σ|x||w| + |b|); the
// paths of one CPU agree with each other bit for bit (they sum in the same
// order, and FMA rounds once either way), and NaN in the input stays NaN
// in its row.
func TestDenseMatchesGEMM(t *testing.T) {
	var paths []int
	for _, lanes := range lanesRun() {
		if lanes > 1 {
			paths = append(paths, lanes)
		}
	}
	if len(paths) == 0 {
		t.Skip("no vector path of dense.c on this CPU (or in this build)")
	}
	defer UseGonum(true)()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, in := range []int{1, 3, 64, 130} {
		for _, out := range []int{1, 2, 6, 7, 8, 9, 16, 17, 31, 33, 48, 63, 64, 65, 130} {
			// 17 rows: a head of 3 to 7 columns takes dense.c's dot products
			// from 16.
			for _, rows := range []int{1, 3, 4, 5, 9, 17} {
				for _, act := range []Activation{"", Tanh, ReLU} {
					name := fmt.Sprintf("in=%d/out=%d/rows=%d/act=%q", in, out, rows, act)
					x, w, b := normals(rng, rows*in), normals(rng, in*out), normals(rng, out)
					if rows > 2 {
						x[2*in] = float32(math.NaN()) // row 2 is NaN throughout
					}
					want := make([]float32, rows*out)
					denseGEMM(x, w, b, want, rows, in, out, act)
					var first []float32
					for _, lanes := range paths {
						// One value past the layer's output must be left alone.
						got := make([]float32, rows*out+1)
						got[rows*out] = 42
						if !(elementwise{lanes}).denseOn(x, w, b, got, rows, in, out, act) {
							t.Fatalf("%s: lanes=%d: dense.c declined a path the CPU runs", name, lanes)
						}
						if got[rows*out] != 42 {
							t.Fatalf("%s: lanes=%d: wrote past the output", name, lanes)
						}
						got = got[:rows*out]
						checkDense(t, fmt.Sprintf("%s/lanes=%d", name, lanes), x, w, b, got, want, rows, in, out)
						if first == nil {
							first = got
						} else if i := sameBits(got, first); i >= 0 {
							t.Errorf("%s: lanes=%d: [%d] = %v, lanes=%d gave %v", name, lanes, i, got[i], paths[0], first[i])
						}
					}
				}
			}
		}
	}
}

// checkDense holds got to want, both act(x·W + b), within 8 roundings of
// each value's magnitude (tanh and ReLU only shrink a difference).
func checkDense(t *testing.T, name string, x, w, b, got, want []float32, rows, in, out int) {
	t.Helper()
	for r := range rows {
		for j := range out {
			g, e := got[r*out+j], want[r*out+j]
			if math.IsNaN(float64(e)) || math.IsNaN(float64(g)) {
				if math.IsNaN(float64(e)) != math.IsNaN(float64(g)) {
					t.Fatalf("%s: [%d,%d] = %v, want %v", name, r, j, g, e)
				}
				continue
			}
			mag := math.Abs(float64(b[j]))
			for k := range in {
				mag += math.Abs(float64(x[r*in+k]) * float64(w[k*out+j]))
			}
			if d := math.Abs(float64(g) - float64(e)); d > 8*float64(in+1)*mag*0x1p-24 {
				t.Fatalf("%s: [%d,%d] = %v, want %v (off by %.3g, magnitude %.3g)", name, r, j, g, e, d, mag)
			}
		}
	}
}

// TestForwardDenseMatchesGEMM: a whole forward pass at an actor's batch,
// whose dense layers dense.c runs, gives what the GEMM path gives to
// float32 rounding: CartPole's MLP and MinAtar's convolutional network.
func TestForwardDenseMatchesGEMM(t *testing.T) {
	// A layer that denseFaster gives to dense.c: does this build and CPU run it?
	one := make([]float32, 64)
	if nativeKernels.dense == nil || !nativeKernels.dense(one, one, one, make([]float32, 64), 8, 1, 8, "") {
		t.Skip("no vector path of dense.c on this CPU (or in this build)")
	}
	for _, net := range benchNets {
		for _, batch := range []int{1, 8, 16} {
			t.Run(fmt.Sprintf("%s/batch=%d", net.name, batch), func(t *testing.T) {
				m, err := NewActorCritic(net.spec, 3)
				if err != nil {
					t.Fatal(err)
				}
				obs := normals(rand.New(rand.NewPCG(13, uint64(batch))), batch*net.spec.ObsDim)
				var ws Workspace
				var got, want Output
				if err := m.Forward(obs, batch, &ws, &got); err != nil {
					t.Fatal(err)
				}
				prev := active
				active = gemmKernels
				err = m.Forward(obs, batch, &ws, &want)
				active = prev
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range []struct {
					name      string
					got, want []float32
				}{{"logits", got.Logits, want.Logits}, {"values", got.Values, want.Values}} {
					for i := range o.want {
						if d := math.Abs(float64(o.got[i] - o.want[i])); d > 1e-5*math.Max(1, math.Abs(float64(o.want[i]))) {
							t.Fatalf("%s[%d] = %v, want %v", o.name, i, o.got[i], o.want[i])
						}
					}
				}
			})
		}
	}
}
