package ppo

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
)

// gaeBatch builds a three-step batch with rewards 1, values 1, 2, 3 and
// the given flags and bootstrap value.
func gaeBatch(term, trunc [3]uint8, bootstrap float32) *api.SampleBatch {
	return &api.SampleBatch{
		Rewards:        api.Tensor[float32]{Shape: []int{3}, Data: []float32{1, 1, 1}},
		Values:         api.Tensor[float32]{Shape: []int{3}, Data: []float32{1, 2, 3}},
		Terminated:     api.Tensor[uint8]{Shape: []int{3}, Data: term[:]},
		Truncated:      api.Tensor[uint8]{Shape: []int{3}, Data: trunc[:]},
		BootstrapValue: bootstrap,
	}
}

func TestGAEHandComputed(t *testing.T) {
	// With γ = λ = 0.5 and no episode end: δ2 = 1 + 0.5·4 - 3 = 0,
	// δ1 = 1 + 0.5·3 - 2 = 0.5, δ0 = 1 + 0.5·2 - 1 = 1; A2 = 0,
	// A1 = 0.5 + 0.25·0 = 0.5, A0 = 1 + 0.25·0.5 = 1.125; R = A + V.
	tests := []struct {
		name          string
		gamma, lambda float64
		term, trunc   [3]uint8
		bootstrap     float32
		wantAdv       []float64
		wantRet       []float64
		wantMid       int
	}{
		{"no end", 0.5, 0.5, [3]uint8{}, [3]uint8{}, 4,
			[]float64{1.125, 0.5, 0}, []float64{2.125, 2.5, 3}, 0},
		// δ1 = 1 - 2 = -1 with no carry from step 2; A0 = 1 + 0.25·(-1).
		{"terminated inside", 0.5, 0.5, [3]uint8{0, 1, 0}, [3]uint8{}, 4,
			[]float64{0.75, -1, 0}, []float64{1.75, 1, 3}, 0},
		// The bootstrap value is ignored: δ2 = 1 - 3 = -2, A1 = 0.5 + 0.25·(-2) = 0.
		{"terminated last", 0.5, 0.5, [3]uint8{0, 0, 1}, [3]uint8{}, 4,
			[]float64{1, 0, -2}, []float64{2, 2, 1}, 0},
		{"truncated last bootstraps", 0.5, 0.5, [3]uint8{}, [3]uint8{0, 0, 1}, 4,
			[]float64{1.125, 0.5, 0}, []float64{2.125, 2.5, 3}, 0},
		{"truncated inside is terminal", 0.5, 0.5, [3]uint8{}, [3]uint8{0, 1, 0}, 4,
			[]float64{0.75, -1, 0}, []float64{1.75, 1, 3}, 1},
		{"both flags count as terminated", 0.5, 0.5, [3]uint8{0, 1, 0}, [3]uint8{0, 1, 0}, 4,
			[]float64{0.75, -1, 0}, []float64{1.75, 1, 3}, 0},
		// γ = λ = 1: Monte Carlo returns 3 + 4, 2 + 4, 1 + 4.
		{"monte carlo", 1, 1, [3]uint8{}, [3]uint8{}, 4,
			[]float64{6, 4, 2}, []float64{7, 6, 5}, 0},
		// Step 0 ends its episode: R0 = 1; steps 1 and 2 bootstrap from 4.
		{"monte carlo terminated inside", 1, 1, [3]uint8{1, 0, 0}, [3]uint8{}, 4,
			[]float64{0, 4, 2}, []float64{1, 6, 5}, 0},
		// λ = 0: A = δ, the one-step TD error.
		{"td", 0.5, 0, [3]uint8{}, [3]uint8{}, 4,
			[]float64{1, 0.5, 0}, []float64{2, 2.5, 3}, 0},
		{"no discount", 0, 0.5, [3]uint8{}, [3]uint8{}, 4,
			[]float64{0, -1, -2}, []float64{1, 1, 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := gaeBatch(tt.term, tt.trunc, tt.bootstrap)
			adv, ret := make([]float32, 3), make([]float32, 3)
			mid, err := GAE(b, tt.gamma, tt.lambda, adv, ret)
			if err != nil {
				t.Fatal(err)
			}
			if mid != tt.wantMid {
				t.Errorf("mid-batch truncations = %d, want %d", mid, tt.wantMid)
			}
			for i := range 3 {
				if math.Abs(float64(adv[i])-tt.wantAdv[i]) > 1e-6 || math.Abs(float64(ret[i])-tt.wantRet[i]) > 1e-6 {
					t.Errorf("step %d: advantage %v, return %v; want %v, %v", i, adv[i], ret[i], tt.wantAdv[i], tt.wantRet[i])
				}
			}
		})
	}
}

// lambdaReturnGAE is a reference written from the definition of the
// λ-return rather than from the TD-error recursion: for every step t,
// G^λ_t = (1-λ)·Σ_{k=1}^{H-1} λ^{k-1}·G^(k)_t + λ^{H-1}·G^(H)_t, where H is
// the number of steps to the end of the episode or batch and G^(k)_t the
// k-step return bootstrapped from the value k steps ahead (the bootstrap
// value or 0 at the end). The advantage is G^λ_t - V_t. It costs O(T³).
func lambdaReturnGAE(b *api.SampleBatch, gamma, lambda float64) (adv, ret []float64) {
	n := b.Len()
	r, v := b.Rewards.Data, b.Values.Data
	ends := func(t int) bool { return b.Terminated.Data[t] == 1 || b.Truncated.Data[t] == 1 }
	// valueAfter is the value of the state after step t.
	valueAfter := func(t int) float64 {
		switch {
		case b.Terminated.Data[t] == 1:
			return 0
		case t == n-1:
			return float64(b.BootstrapValue)
		case ends(t):
			return 0 // mid-batch truncation: treated as terminal
		}
		return float64(v[t+1])
	}
	adv, ret = make([]float64, n), make([]float64, n)
	for t := range n {
		h := 1
		for t+h-1 < n-1 && !ends(t+h-1) {
			h++
		}
		kStep := func(k int) float64 {
			var g, disc float64 = 0, 1
			for i := range k {
				g += disc * float64(r[t+i])
				disc *= gamma
			}
			return g + disc*valueAfter(t+k-1)
		}
		var g float64
		for k := 1; k < h; k++ {
			g += (1 - lambda) * math.Pow(lambda, float64(k-1)) * kStep(k)
		}
		g += math.Pow(lambda, float64(h-1)) * kStep(h)
		ret[t] = g
		adv[t] = g - float64(v[t])
	}
	return adv, ret
}

func TestGAEMatchesLambdaReturn(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		spec batchSpec
	}{
		{"one step", batchSpec{t: 1}},
		{"one terminated step", batchSpec{t: 1, terminated: []int{0}}},
		{"open", batchSpec{t: 20}},
		{"episodes inside", batchSpec{t: 20, terminated: []int{3, 4, 11}}},
		{"terminated last", batchSpec{t: 20, terminated: []int{7, 19}}},
		{"truncated last", batchSpec{t: 20, terminated: []int{5}, truncated: []int{19}}},
		{"truncated inside", batchSpec{t: 20, truncated: []int{0, 9}, terminated: []int{9, 15}}},
	}
	for _, tt := range tests {
		for _, p := range [][2]float64{{0.99, 0.95}, {0.9, 0}, {1, 1}, {0.5, 0.7}} {
			b := randBatch(rng, cartPoleSpec, tt.spec)
			adv, ret := make([]float32, tt.spec.t), make([]float32, tt.spec.t)
			if _, err := GAE(b, p[0], p[1], adv, ret); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			wantAdv, wantRet := lambdaReturnGAE(b, p[0], p[1])
			for i := range adv {
				if math.Abs(float64(adv[i])-wantAdv[i]) > 1e-5 || math.Abs(float64(ret[i])-wantRet[i]) > 1e-5 {
					t.Errorf("%s, γ=%v λ=%v, step %d: got A=%v R=%v, want A=%v R=%v",
						tt.name, p[0], p[1], i, adv[i], ret[i], wantAdv[i], wantRet[i])
				}
			}
		}
	}
}

func TestGAEErrors(t *testing.T) {
	good := func() *api.SampleBatch { return gaeBatch([3]uint8{}, [3]uint8{}, 0) }
	tests := []struct {
		name     string
		b        *api.SampleBatch
		adv, ret int
	}{
		{"nil batch", nil, 3, 3},
		{"no values", func() *api.SampleBatch { b := good(); b.Values = api.Tensor[float32]{}; return b }(), 3, 3},
		{"short flags", func() *api.SampleBatch { b := good(); b.Truncated.Data = b.Truncated.Data[:2]; return b }(), 3, 3},
		{"short advantages", good(), 2, 3},
		{"long returns", good(), 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := GAE(tt.b, 0.99, 0.95, make([]float32, tt.adv), make([]float32, tt.ret)); err == nil {
				t.Fatal("GAE succeeded")
			}
		})
	}
	_, err := GAE(nil, 0.99, 0.95, nil, nil)
	if !errors.Is(err, ErrInvalidBatch) {
		t.Errorf("error %v does not wrap ErrInvalidBatch", err)
	}
}
