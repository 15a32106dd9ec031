package ppo

import (
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
)

// TestConvLearnsPixelBandit is the smoke test that PPO trains a conv
// network end to end (policy sampling, Update, publishing the parameters
// back): one-step episodes whose observation is a 6×6 image with one lit
// pixel, rewarded 1 for the action naming the image's half (left or right)
// the pixel is in. Nothing but the pixel's position tells the halves
// apart, so the policy must learn it through the convolution. From a
// near-uniform start (half right), greedy accuracy must reach 95% and the
// value loss must fall within 40 updates of 256 steps.
func TestConvLearnsPixelBandit(t *testing.T) {
	const (
		h, w    = 6, 6
		steps   = 256
		updates = 40
	)
	pcfg := policy.Config{ObsDim: h * w, ObsShape: []int{h, w, 1}, ActionDim: 2, Head: nn.Categorical,
		Conv: []nn.ConvLayer{{Filters: 4, Kernel: 3, Stride: 1, Padding: 1}}, Hidden: []int{16},
		Activation: nn.ReLU, SharedTrunk: true, Seed: 1}
	pol, err := policy.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.LR, cfg.MinibatchSize, cfg.Seed = 3e-3, 64, 1
	l, err := NewLearner(pol.Net().Clone(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	// draw fills obs ([n, h, w, 1]) with one lit pixel per image and
	// returns each image's correct action.
	draw := func(obs []float32, n int) []int32 {
		clear(obs)
		want := make([]int32, n)
		for i := range n {
			x := rng.IntN(w)
			obs[i*h*w+rng.IntN(h)*w+x] = 1
			if x >= w/2 {
				want[i] = 1
			}
		}
		return want
	}
	evalObs := make([]float32, 512*h*w)
	evalWant := draw(evalObs, 512)
	accuracy := func() float64 {
		var out nn.Output
		if err := l.Net().Forward(evalObs, 512, nn.NewWorkspace(), &out); err != nil {
			t.Fatal(err)
		}
		right := 0
		for i, want := range evalWant {
			if nn.GreedyCategorical(out.Logits[2*i:2*i+2]) == want {
				right++
			}
		}
		return float64(right) / 512
	}

	before := accuracy()
	var first, last Stats
	var inf api.Inference
	for u := range updates {
		b := &api.SampleBatch{
			Obs: api.NewFrames(api.NewTensor[float32](steps, h*w)), Actions: api.NewTensor[int32](steps),
			Rewards: api.NewTensor[float32](steps), Terminated: api.NewTensor[uint8](steps),
			Truncated: api.NewTensor[uint8](steps), LogProbs: api.NewTensor[float32](steps),
			Values: api.NewTensor[float32](steps),
		}
		want := draw(b.Obs.Data, steps)
		if err := pol.Infer(b.Obs.Tensor, &inf); err != nil {
			t.Fatal(err)
		}
		copy(b.Actions.Data, inf.Actions.Data)
		copy(b.LogProbs.Data, inf.LogProbs.Data)
		copy(b.Values.Data, inf.Values.Data)
		for i := range steps {
			b.Terminated.Data[i] = 1
			if inf.Actions.Data[i] == want[i] {
				b.Rewards.Data[i] = 1
			}
		}
		st, err := l.Update([]*api.SampleBatch{b})
		if err != nil {
			t.Fatalf("update %d: %v", u, err)
		}
		if u == 0 {
			first = st
		}
		last = st
		if err := pol.SetParams(int64(u+1), l.Params()); err != nil {
			t.Fatal(err)
		}
	}
	after := accuracy()
	t.Logf("greedy accuracy %.3f -> %.3f; value loss %.4f -> %.4f", before, after, first.ValueLoss, last.ValueLoss)
	if after < 0.95 {
		t.Errorf("greedy accuracy %.3f after %d updates (%.3f before), want >= 0.95", after, updates, before)
	}
	if !(last.ValueLoss < first.ValueLoss/2) {
		t.Errorf("value loss went from %v to %v, want it halved", first.ValueLoss, last.ValueLoss)
	}
}
