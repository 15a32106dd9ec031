package ppo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/vmihailenco/msgpack/v5"
)

// onPolicyBatches returns batches of the given lengths whose LogProbs and
// Values are those of l's current network, as a fresh rollout would have:
// the first epoch of an update then starts at ratio 1.
func onPolicyBatches(t *testing.T, l *Learner, rng *rand.Rand, specs ...batchSpec) []*api.SampleBatch {
	t.Helper()
	var out []*api.SampleBatch
	spec := l.Net().Spec()
	for _, s := range specs {
		b := randBatch(rng, spec, s)
		var o nn.Output
		if err := l.Net().Forward(b.Obs.Data, s.t, nn.NewWorkspace(), &o); err != nil {
			t.Fatal(err)
		}
		copy(b.Values.Data, o.Values)
		a := spec.ActionDim
		for i := range s.t {
			if spec.Head == nn.Gaussian {
				b.LogProbs.Data[i] = nn.GaussianLogProb(o.Mean[i*a:(i+1)*a], o.LogStd, b.ContActions.Data[i*a:(i+1)*a])
			} else {
				b.LogProbs.Data[i] = nn.CategoricalLogProb(o.Logits[i*a:(i+1)*a], b.Actions.Data[i])
			}
		}
		out = append(out, b)
	}
	return out
}

func update(t *testing.T, l *Learner, batches []*api.SampleBatch) Stats {
	t.Helper()
	st, err := l.Update(batches)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return st
}

func TestNewLearnerErrors(t *testing.T) {
	if _, err := NewLearner(nil, DefaultConfig()); err == nil {
		t.Error("NewLearner(nil) succeeded")
	}
	_, err := NewLearner(newNet(t, cartPoleSpec, 1), Config{})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewLearner with the zero Config: %v, want ErrInvalidConfig", err)
	}
}

// TestUpdateLearns runs repeated updates on one fixed set of batches, for
// both heads: the loss terms must move the way the objective says.
func TestUpdateLearns(t *testing.T) {
	for _, head := range []nn.HeadKind{nn.Categorical, nn.Gaussian} {
		t.Run(string(head), func(t *testing.T) {
			spec := nn.Spec{ObsDim: 4, Hidden: []int{16}, Activation: nn.Tanh, Head: head, ActionDim: 2}
			cfg := DefaultConfig()
			cfg.LR, cfg.MinibatchSize = 3e-3, 32
			l := newLearner(t, spec, cfg)
			rng := rand.New(rand.NewPCG(7, 8))
			batches := onPolicyBatches(t, l, rng, batchSpec{t: 50, terminated: []int{20}}, batchSpec{t: 30, truncated: []int{29}})

			first := update(t, l, batches)
			if first.Samples != 80 || first.Epochs != 4 || first.Minibatches != 4*3 {
				t.Errorf("samples %d, epochs %d, minibatches %d; want 80, 4, 12", first.Samples, first.Epochs, first.Minibatches)
			}
			var last Stats
			for range 30 {
				last = update(t, l, batches)
			}
			// The returns of random rewards are noise a small network
			// can only memorise slowly; ask for progress, not a fit.
			if !(last.ValueLoss < 0.9*first.ValueLoss) {
				t.Errorf("value loss went from %v to %v, want a 10%% drop", first.ValueLoss, last.ValueLoss)
			}
			// The data is stale after the first update, so the ratios leave
			// the clip range and the surrogate improves (falls) as the
			// policy moves toward positive-advantage actions.
			if !(last.PolicyLoss < first.PolicyLoss) || !(last.ClipFrac > 0) || !(last.ApproxKL > first.ApproxKL) {
				t.Errorf("policy did not move: policy loss %v -> %v, clip fraction %v, KL %v -> %v",
					first.PolicyLoss, last.PolicyLoss, last.ClipFrac, first.ApproxKL, last.ApproxKL)
			}
			if l.Updates() != 31 {
				t.Errorf("Updates() = %d, want 31", l.Updates())
			}
		})
	}
}

func TestUpdateStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	tests := []struct {
		name            string
		edit            func(*Config)
		specs           []batchSpec
		wantEpochs      int
		wantMinibatches int
		wantMid         int
	}{
		{"one minibatch", func(c *Config) { c.MinibatchSize = 1000 }, []batchSpec{{t: 10}}, 4, 4, 0},
		// 10 samples in ceil(10/4) = 3 minibatches of 3, 3 and 4.
		{"uneven minibatches", func(c *Config) { c.MinibatchSize = 4; c.Epochs = 2 }, []batchSpec{{t: 10}}, 2, 6, 0},
		{"minibatches of one", func(c *Config) { c.MinibatchSize = 1; c.Epochs = 1 }, []batchSpec{{t: 5}, {t: 0}, {t: 2}}, 1, 7, 0},
		{"mid-batch truncations", func(*Config) {}, []batchSpec{{t: 10, truncated: []int{3, 9}}, {t: 5, truncated: []int{0}}}, 4, 4, 2},
		// Stale log-probabilities make the first epoch's KL large.
		{"target kl", func(c *Config) { c.TargetKL = 1e-9 }, []batchSpec{{t: 10}}, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			l := newLearner(t, cartPoleSpec, cfg)
			var batches []*api.SampleBatch
			for _, s := range tt.specs {
				batches = append(batches, randBatch(rng, cartPoleSpec, s))
			}
			st := update(t, l, batches)
			if st.Epochs != tt.wantEpochs || st.Minibatches != tt.wantMinibatches || st.MidBatchTruncations != tt.wantMid {
				t.Errorf("epochs %d, minibatches %d, mid-batch truncations %d; want %d, %d, %d",
					st.Epochs, st.Minibatches, st.MidBatchTruncations, tt.wantEpochs, tt.wantMinibatches, tt.wantMid)
			}
			if st.LR != cfg.LR || st.GradNorm <= 0 || st.Entropy <= 0 || st.ApproxKL < 0 {
				t.Errorf("implausible stats %+v", st)
			}
		})
	}
}

func TestExplainedVariance(t *testing.T) {
	tests := []struct {
		name    string
		pred, y []float32
		want    float64
		wantNaN bool
	}{
		{"perfect", []float32{1, 2, 3}, []float32{1, 2, 3}, 1, false},
		{"constant prediction", []float32{5, 5, 5}, []float32{1, 2, 3}, 0, false},
		// y - pred is constant: a biased critic still explains everything.
		{"offset only", []float32{0, 1, 2}, []float32{1, 2, 3}, 1, false},
		// y - pred = (-2, 0, 2): Var 8/3 against Var(y) = 2/3.
		{"anti", []float32{3, 2, 1}, []float32{1, 2, 3}, -3, false},
		{"constant returns", []float32{1, 2, 3}, []float32{2, 2, 2}, 0, true},
	}
	for _, tt := range tests {
		l := &Learner{}
		l.all.adv, l.all.returns, l.all.oldValues = make([]float32, len(tt.y)), tt.y, tt.pred
		_, got, err := l.standardize(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantNaN != math.IsNaN(got) || !tt.wantNaN && math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: explained variance %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestUpdateRejectsBadBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	good := func() *api.SampleBatch { return randBatch(rng, cartPoleSpec, batchSpec{t: 4}) }
	gaussian := nn.Spec{ObsDim: 4, Hidden: []int{8}, Activation: nn.Tanh, Head: nn.Gaussian, ActionDim: 2}
	tests := []struct {
		name string
		b    *api.SampleBatch
	}{
		{"nil", nil},
		{"invalid", func() *api.SampleBatch { b := good(); b.Rewards.Data = b.Rewards.Data[:3]; return b }()},
		{"wrong observation width", randBatch(rng, nn.Spec{ObsDim: 3, ActionDim: 2, Head: nn.Categorical}, batchSpec{t: 4})},
		{"no log-probabilities", func() *api.SampleBatch { b := good(); b.LogProbs = api.Tensor[float32]{}; return b }()},
		{"no values", func() *api.SampleBatch { b := good(); b.Values = api.Tensor[float32]{}; return b }()},
		{"action out of range", func() *api.SampleBatch { b := good(); b.Actions.Data[2] = 2; return b }()},
		{"continuous actions", randBatch(rng, gaussian, batchSpec{t: 4})},
		{"nan reward", func() *api.SampleBatch { b := good(); b.Rewards.Data[1] = float32(math.NaN()); return b }()},
		{"infinite observation", func() *api.SampleBatch { b := good(); b.Obs.Data[5] = float32(math.Inf(-1)); return b }()},
		{"nan log-probability", func() *api.SampleBatch { b := good(); b.LogProbs.Data[0] = float32(math.NaN()); return b }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLearner(t, cartPoleSpec, DefaultConfig())
			before := l.State()
			// The bad batch comes second, so a learner that applied the
			// first before checking the second would show it.
			_, err := l.Update([]*api.SampleBatch{good(), tt.b})
			if !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("Update = %v, want an error wrapping ErrInvalidBatch", err)
			}
			if after := l.State(); !slices.Equal(before.Params, after.Params) || after.Updates != 0 || after.AdamStep != 0 {
				t.Error("a rejected update changed the learner")
			}
		})
	}
	t.Run("no samples", func(t *testing.T) {
		l := newLearner(t, cartPoleSpec, DefaultConfig())
		for _, batches := range [][]*api.SampleBatch{nil, {randBatch(rng, cartPoleSpec, batchSpec{t: 0})}} {
			if _, err := l.Update(batches); !errors.Is(err, ErrInvalidBatch) {
				t.Errorf("Update(%d empty batches) = %v, want ErrInvalidBatch", len(batches), err)
			}
		}
	})
	t.Run("gaussian head needs continuous actions", func(t *testing.T) {
		l := newLearner(t, gaussian, DefaultConfig())
		if _, err := l.Update([]*api.SampleBatch{good()}); !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("Update = %v, want ErrInvalidBatch", err)
		}
	})
}

// TestUpdateRatioOverflow gives batches whose behaviour log-probabilities
// are so low that every ratio overflows to +Inf. Where the advantage is
// positive the clipped term wins and the row has no gradient, so the
// update must go through; a negative advantage makes the gradient
// infinite, which must be reported, not applied.
func TestUpdateRatioOverflow(t *testing.T) {
	tests := []struct {
		name    string
		reward  float32
		wantErr error
	}{
		{"positive advantages are clipped", 100, nil},
		{"negative advantage", -100, ErrNonFinite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NormalizeAdvantages = false
			l := newLearner(t, cartPoleSpec, cfg)
			b := randBatch(rand.New(rand.NewPCG(4, 4)), cartPoleSpec, batchSpec{t: 8, terminated: []int{7}})
			for i := range b.LogProbs.Data {
				b.LogProbs.Data[i] = -1e30
				b.Rewards.Data[i], b.Values.Data[i] = tt.reward, 0
			}
			before := slices.Clone(l.Params())
			_, err := l.Update([]*api.SampleBatch{b})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if l.Updates() != 0 || !slices.Equal(before, l.Params()) {
					t.Error("the failed step was applied")
				}
				return
			}
			if i := api.FirstNonFinite(l.Params()); i >= 0 {
				t.Errorf("parameter %d is %v", i, l.Params()[i])
			}
		})
	}
}

func TestUpdateDeterministic(t *testing.T) {
	run := func(seed int64) []float32 {
		cfg := DefaultConfig()
		cfg.Seed, cfg.MinibatchSize = seed, 16
		l := newLearner(t, cartPoleSpec, cfg)
		rng := rand.New(rand.NewPCG(9, 9))
		for range 3 {
			update(t, l, onPolicyBatches(t, l, rng, batchSpec{t: 40, terminated: []int{10}}, batchSpec{t: 24}))
		}
		return slices.Clone(l.Params())
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Error("two learners with equal seeds and data diverged")
	}
	if slices.Equal(a, c) {
		t.Error("the shuffling seed had no effect")
	}
}

// TestStateRestore checks that a checkpoint taken between updates, sent
// through msgpack and restored into a learner with different parameters,
// resumes exactly: same parameters after the next update, bit for bit, for
// an MLP and for a conv network.
func TestStateRestore(t *testing.T) {
	for _, spec := range []nn.Spec{cartPoleSpec, tinyImage} {
		t.Run(fmt.Sprintf("conv=%v", spec.Conv), func(t *testing.T) { testStateRestore(t, spec) })
	}
}

func testStateRestore(t *testing.T, spec nn.Spec) {
	cfg := DefaultConfig()
	cfg.MinibatchSize, cfg.LRDecayUpdates = 16, 10
	rng := rand.New(rand.NewPCG(5, 5))
	a := newLearner(t, spec, cfg)
	var data [][]*api.SampleBatch
	for range 3 {
		data = append(data, onPolicyBatches(t, a, rng, batchSpec{t: 40, terminated: []int{12}}))
	}
	update(t, a, data[0])
	update(t, a, data[1])
	wire, err := msgpack.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	update(t, a, data[2])

	var s LearnerState
	if err := msgpack.Unmarshal(wire, &s); err != nil {
		t.Fatal(err)
	}
	b, err := NewLearner(newNet(t, spec, 99), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(s); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if b.Updates() != 2 {
		t.Errorf("restored Updates() = %d, want 2", b.Updates())
	}
	st := update(t, b, data[2])
	if want := cfg.lrAt(2); st.LR != want {
		t.Errorf("restored learner used lr %v, want %v", st.LR, want)
	}
	if !slices.Equal(a.Params(), b.Params()) {
		t.Error("the restored learner diverged from the original")
	}
	// Restore copies: changing the state afterwards must not reach b.
	s.Params[0] = 1e6
	if b.Params()[0] == 1e6 {
		t.Error("Restore kept a reference to the state's parameters")
	}
}

func TestRestoreRejects(t *testing.T) {
	l := newLearner(t, cartPoleSpec, DefaultConfig())
	nan := float32(math.NaN())
	tests := []struct {
		name string
		edit func(*LearnerState)
	}{
		{"short params", func(s *LearnerState) { s.Params = s.Params[1:] }},
		{"long first moment", func(s *LearnerState) { s.AdamM = append(s.AdamM, 0) }},
		{"nil second moment", func(s *LearnerState) { s.AdamV = nil }},
		{"nan parameter", func(s *LearnerState) { s.Params[3] = nan }},
		{"infinite moment", func(s *LearnerState) { s.AdamM[0] = float32(math.Inf(1)) }},
		{"negative second moment", func(s *LearnerState) { s.AdamV[1] = -1 }},
		{"negative step", func(s *LearnerState) { s.AdamStep = -1 }},
		{"negative updates", func(s *LearnerState) { s.Updates = -3 }},
		{"corrupt rng", func(s *LearnerState) { s.RNG = []byte("not a pcg") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := l.State()
			s := l.State()
			s.Params[0] += 1 // a change that would show if applied
			s.AdamStep, s.Updates = 5, 5
			tt.edit(&s)
			if err := l.Restore(s); !errors.Is(err, ErrInvalidState) {
				t.Fatalf("Restore = %v, want an error wrapping ErrInvalidState", err)
			}
			after := l.State()
			if !slices.Equal(before.Params, after.Params) || after.AdamStep != 0 || after.Updates != 0 || !slices.Equal(before.RNG, after.RNG) {
				t.Error("a rejected Restore changed the learner")
			}
		})
	}
}
