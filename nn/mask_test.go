package nn_test

import (
	"math"
	"slices"
	"testing"

	"github.com/distrl/distrl/nn"
)

// TestActionMask: a spec's ActionMask gives the actions an observation
// marks unavailable the logit MaskedLogit and leaves the others as the
// same network without a mask computes them; a row that marks none keeps
// its logits. The distribution helpers then give those actions no
// probability, no entropy and no gradient.
func TestActionMask(t *testing.T) {
	spec := nn.Spec{ObsDim: 4, Hidden: []int{8}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 3}
	plain, err := nn.NewActorCritic(spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	spec.ActionMask = []int{0, 1, 2} // obs[i] > 0.5: action i available
	masked, err := nn.NewActorCritic(spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	obs := []float32{
		1, 0, 1, 0.3, // action 1 unavailable
		0, 0, 0.9, -2, // only action 2
		0, 0, 0, 5, // none marked: unmasked
	}
	want := [][]bool{{false, true, false}, {true, true, false}, {false, false, false}}
	var ws, ws2 = nn.NewWorkspace(), nn.NewWorkspace()
	var out, ref nn.Output
	if err := masked.Forward(obs, 3, ws, &out); err != nil {
		t.Fatal(err)
	}
	if err := plain.Forward(obs, 3, ws2, &ref); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Values, ref.Values) {
		t.Errorf("values %v, want the unmasked network's %v", out.Values, ref.Values)
	}
	for r, row := range want {
		logits := out.Logits[r*3 : (r+1)*3]
		for a, off := range row {
			got, plainLogit := logits[a], ref.Logits[r*3+a]
			if off && got != nn.MaskedLogit || !off && got != plainLogit {
				t.Errorf("row %d action %d: logit %v (unmasked %v), masked: %v", r, a, got, plainLogit, off)
			}
		}
		var sum float64
		for a, off := range row {
			p := math.Exp(float64(nn.CategoricalLogProb(logits, int32(a))))
			if off && p != 0 {
				t.Errorf("row %d: masked action %d has probability %v", r, a, p)
			}
			sum += p
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Errorf("row %d: probabilities sum to %v", r, sum)
		}
		available := 3 - countTrue(row)
		if h := float64(nn.CategoricalEntropy(logits)); math.IsNaN(h) || h > math.Log(float64(available))+1e-6 {
			t.Errorf("row %d: entropy %v over %d available actions", r, h, available)
		}
		d := make([]float32, 3)
		nn.CategoricalEntropyGrad(logits, 1, d)
		nn.CategoricalLogProbGrad(logits, nn.GreedyCategorical(logits), 1, d)
		for a, off := range row {
			if off && d[a] != 0 || math.IsNaN(float64(d[a])) {
				t.Errorf("row %d: gradient %v for action %d (masked: %v)", r, d[a], a, off)
			}
		}
		for u := 0.0; u < 1; u += 1.0 / 64 {
			if a, _ := nn.SampleCategoricalWith(logits, 3, u); row[a] {
				t.Fatalf("row %d: draw %v sampled the masked action %d", r, u, a)
			}
		}
		if row[nn.GreedyCategorical(logits)] {
			t.Errorf("row %d: the greedy action is masked", r)
		}
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
