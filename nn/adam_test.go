package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/distrl/distrl/nn"
)

func TestAdamHandComputed(t *testing.T) {
	a := nn.NewAdam(2, 0.1)
	params := []float32{1, -2}
	steps := []struct {
		grad []float32
		want []float64
	}{
		// Step 1: m̂ = g and v̂ = g², so each parameter moves by lr·sign(g).
		{[]float32{0.5, -1}, []float64{0.9, -1.9}},
		// Step 2, parameter 0: m = 0.9·0.05 + 0.1·0.5 = 0.095, m̂ = 0.095/0.19 = 0.5;
		// v = 0.999·0.00025 + 0.001·0.25 = 0.00049975, v̂ = v/0.001999 = 0.25;
		// step 0.1·0.5/0.5 = 0.1.
		// Parameter 1: m = -0.09 + 0.05 = -0.04, m̂ = -0.2105263;
		// v = 0.000999 + 0.00025 = 0.001249, v̂ = 0.6248124, sqrt 0.7904507;
		// step 0.1·(-0.2105263)/0.7904507 = -0.0266337.
		{[]float32{0.5, 0.5}, []float64{0.8, -1.8733663}},
	}
	for i, s := range steps {
		if err := a.Update(params, s.grad); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		for j, w := range s.want {
			if !near(float64(params[j]), w, 1e-6) {
				t.Errorf("step %d: params[%d] = %.7f, want %.7f", i+1, j, params[j], w)
			}
		}
	}
	if a.Step != 2 {
		t.Errorf("Step = %d, want 2", a.Step)
	}
}

func TestAdamErrors(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(a *nn.Adam)
		params []float32
		grad   []float32
	}{
		{"short params", func(*nn.Adam) {}, make([]float32, 2), make([]float32, 3)},
		{"short grad", func(*nn.Adam) {}, make([]float32, 3), make([]float32, 2)},
		{"short state", func(a *nn.Adam) { a.V = a.V[:2] }, make([]float32, 3), make([]float32, 3)},
		{"negative lr", func(a *nn.Adam) { a.LR = -1 }, make([]float32, 3), make([]float32, 3)},
		{"beta1 one", func(a *nn.Adam) { a.Beta1 = 1 }, make([]float32, 3), make([]float32, 3)},
		{"nan beta2", func(a *nn.Adam) { a.Beta2 = float32(math.NaN()) }, make([]float32, 3), make([]float32, 3)},
		{"zero eps", func(a *nn.Adam) { a.Eps = 0 }, make([]float32, 3), make([]float32, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := nn.NewAdam(3, 0.01)
			tt.edit(a)
			before := slices.Clone(tt.params)
			err := a.Update(tt.params, []float32{1, 1, 1}[:len(tt.grad)])
			if err == nil {
				t.Fatal("Update succeeded")
			}
			if a.Step != 0 || !slices.Equal(tt.params, before) {
				t.Error("failed Update changed the state or the parameters")
			}
		})
	}
	err := nn.NewAdam(3, 0.01).Update(make([]float32, 2), make([]float32, 2))
	if !errors.Is(err, nn.ErrShape) {
		t.Errorf("length error %v does not wrap ErrShape", err)
	}
}

func TestClipGradNorm(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name     string
		grad     []float32
		maxNorm  float32
		wantNorm float64
		want     []float64
	}{
		{"under the limit", []float32{3, 4}, 10, 5, []float64{3, 4}},
		{"clipped", []float32{3, 4}, 1, 5, []float64{0.6, 0.8}},
		{"disabled", []float32{3, 4}, 0, 5, []float64{3, 4}},
		{"empty", nil, 1, 0, nil},
		{"nan left alone", []float32{nan, 1}, 1, math.NaN(), []float64{math.NaN(), 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			norm := float64(nn.ClipGradNorm(tt.grad, tt.maxNorm))
			if math.IsNaN(tt.wantNorm) != math.IsNaN(norm) || !math.IsNaN(norm) && !near(norm, tt.wantNorm, 1e-6) {
				t.Errorf("norm = %v, want %v", norm, tt.wantNorm)
			}
			for i, w := range tt.want {
				g := float64(tt.grad[i])
				if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(g) && !near(g, w, 1e-6) {
					t.Errorf("grad[%d] = %v, want %v", i, g, w)
				}
			}
		})
	}
}
