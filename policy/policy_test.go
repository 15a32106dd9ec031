package policy_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
)

var (
	cartPole = policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Seed: 7}
	box      = policy.Config{ObsDim: 3, ActionDim: 2, Head: nn.Gaussian, Hidden: []int{16}, Seed: 7}
)

func newPolicy(t testing.TB, cfg policy.Config) *policy.ActorCritic {
	t.Helper()
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return p
}

// randObs returns a [batch, dim] tensor of standard normal observations.
func randObs(seed uint64, batch, dim int) api.Tensor[float32] {
	rng := rand.New(rand.NewPCG(seed, 1))
	t := api.NewTensor[float32](batch, dim)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64())
	}
	return t
}

func infer(t testing.TB, p *policy.ActorCritic, obs api.Tensor[float32]) api.Inference {
	t.Helper()
	var out api.Inference
	if err := p.Infer(obs, &out); err != nil {
		t.Fatalf("Infer: %v", err)
	}
	return out
}

// reference runs the network nn would build for cfg on obs, independently
// of the policy package.
func reference(t *testing.T, cfg policy.Config, params []float32, obs api.Tensor[float32]) *nn.Output {
	t.Helper()
	hidden := cfg.Hidden
	if hidden == nil {
		hidden = policy.DefaultHidden
	}
	net, err := nn.NewActorCritic(nn.Spec{
		ObsDim: cfg.ObsDim, Hidden: hidden, Activation: nn.Tanh, Head: cfg.Head, ActionDim: cfg.ActionDim,
	}, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if params != nil {
		if err := net.SetParams(params); err != nil {
			t.Fatal(err)
		}
	}
	out := new(nn.Output)
	if err := net.Forward(obs.Data, obs.Shape[0], nn.NewWorkspace(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  policy.Config
	}{
		{"zero obs dim", policy.Config{ActionDim: 2, Head: nn.Categorical}},
		{"zero action dim", policy.Config{ObsDim: 4, Head: nn.Categorical}},
		{"no head", policy.Config{ObsDim: 4, ActionDim: 2}},
		{"unknown head", policy.Config{ObsDim: 4, ActionDim: 2, Head: "beta"}},
		{"unknown activation", policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Activation: "gelu"}},
		{"negative width", policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Hidden: []int{64, -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := policy.New(tt.cfg); !errors.Is(err, nn.ErrInvalidSpec) {
				t.Errorf("New: got %v, want an error wrapping nn.ErrInvalidSpec", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name       string
		hidden     []int
		wantHidden []int
	}{
		{"nil means default", nil, policy.DefaultHidden},
		{"empty means linear", []int{}, []int{}},
		{"explicit", []int{8, 4}, []int{8, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cartPole
			cfg.Hidden = tt.hidden
			p := newPolicy(t, cfg)
			got := p.Config()
			if !slices.Equal(got.Hidden, tt.wantHidden) || got.Activation != nn.Tanh {
				t.Errorf("Config() = hidden %v activation %q, want %v %q", got.Hidden, got.Activation, tt.wantHidden, nn.Tanh)
			}
			if spec := p.Net().Spec(); !slices.Equal(spec.Hidden, tt.wantHidden) {
				t.Errorf("network hidden %v, want %v", spec.Hidden, tt.wantHidden)
			}
		})
	}
}

func TestInferReproducibleForSeed(t *testing.T) {
	for _, cfg := range []policy.Config{cartPole, box} {
		t.Run(string(cfg.Head), func(t *testing.T) {
			obs := randObs(1, 32, cfg.ObsDim)
			a, b := newPolicy(t, cfg), newPolicy(t, cfg)
			for call := range 3 { // the sampling sequence, not just the first draw
				ra, rb := infer(t, a, obs), infer(t, b, obs)
				if !slices.Equal(ra.Actions.Data, rb.Actions.Data) || !slices.Equal(ra.ContActions.Data, rb.ContActions.Data) ||
					!slices.Equal(ra.LogProbs.Data, rb.LogProbs.Data) || !slices.Equal(ra.Values.Data, rb.Values.Data) {
					t.Fatalf("call %d: equal seeds gave different answers", call)
				}
			}
			other := cfg
			other.Seed++
			ra, rc := infer(t, newPolicy(t, cfg), obs), infer(t, newPolicy(t, other), obs)
			if slices.Equal(ra.Values.Data, rc.Values.Data) {
				t.Error("different seeds gave the same values")
			}
		})
	}
}

func TestInferShapes(t *testing.T) {
	tests := []struct {
		name     string
		cfg      policy.Config
		batch    int
		discrete bool
	}{
		{"categorical", cartPole, 5, true},
		{"categorical one row", cartPole, 1, true},
		{"categorical empty batch", cartPole, 0, true},
		{"gaussian", box, 5, false},
		{"gaussian empty batch", box, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, tt.cfg)
			if err := p.SetParams(3, make([]float32, p.NumParams())); err != nil {
				t.Fatal(err)
			}
			out := infer(t, p, randObs(2, tt.batch, tt.cfg.ObsDim))
			for _, err := range []error{out.Actions.Validate(), out.ContActions.Validate(), out.LogProbs.Validate(), out.Values.Validate()} {
				if err != nil {
					t.Fatalf("invalid output tensor: %v", err)
				}
			}
			if tt.discrete {
				if !slices.Equal(out.Actions.Shape, []int{tt.batch}) || !out.ContActions.IsZero() {
					t.Errorf("Actions %v ContActions %v, want [%d] and absent", out.Actions.Shape, out.ContActions.Shape, tt.batch)
				}
				for _, a := range out.Actions.Data {
					if a < 0 || int(a) >= tt.cfg.ActionDim {
						t.Errorf("action %d out of range", a)
					}
				}
			} else if !slices.Equal(out.ContActions.Shape, []int{tt.batch, tt.cfg.ActionDim}) || !out.Actions.IsZero() {
				t.Errorf("ContActions %v Actions %v, want [%d %d] and absent", out.ContActions.Shape, out.Actions.Shape, tt.batch, tt.cfg.ActionDim)
			}
			if !slices.Equal(out.LogProbs.Shape, []int{tt.batch}) || !slices.Equal(out.Values.Shape, []int{tt.batch}) {
				t.Errorf("LogProbs %v Values %v, want [%d]", out.LogProbs.Shape, out.Values.Shape, tt.batch)
			}
			if out.Version != 3 {
				t.Errorf("Version = %d, want 3", out.Version)
			}
		})
	}
}

func TestInferRejectsBadObservations(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		obs  api.Tensor[float32]
		want error // nil: any error
	}{
		{"absent", api.Tensor[float32]{}, nil},
		{"rank 1", api.Tensor[float32]{Shape: []int{4}, Data: make([]float32, 4)}, nil},
		{"rank 3", api.Tensor[float32]{Shape: []int{1, 1, 4}, Data: make([]float32, 4)}, nil},
		{"wrong width", api.NewTensor[float32](2, 5), nil},
		{"data shorter than shape", api.Tensor[float32]{Shape: []int{2, 4}, Data: make([]float32, 7)}, nil},
		{"no shape", api.Tensor[float32]{Data: make([]float32, 4)}, nil},
		{"NaN observation", api.Tensor[float32]{Shape: []int{1, 4}, Data: []float32{0, nan, 0, 0}}, policy.ErrNoValidAction},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, cartPole)
			var out api.Inference
			err := p.Infer(tt.obs, &out)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Infer: got %v, want an error (wrapping %v)", err, tt.want)
			}
		})
	}
	if err := newPolicy(t, cartPole).Infer(api.NewTensor[float32](1, 4), nil); err == nil {
		t.Error("Infer into a nil Inference: no error")
	}
}

// TestDeterministicMatchesNetwork checks deterministic answers against a
// forward pass computed with nn directly: the argmax of the logits (or the
// Gaussian mean), its log-probability and the value.
func TestDeterministicMatchesNetwork(t *testing.T) {
	for _, cfg := range []policy.Config{cartPole, box} {
		t.Run(string(cfg.Head), func(t *testing.T) {
			cfg.Deterministic = true
			p := newPolicy(t, cfg)
			// Larger weights than the initial ones, whose near-uniform
			// policy head would make the argmax a coin toss decided by
			// rounding.
			params := make([]float32, p.NumParams())
			rng := rand.New(rand.NewPCG(9, 9))
			for i := range params {
				params[i] = float32(0.5 * rng.NormFloat64())
			}
			if err := p.SetParams(1, params); err != nil {
				t.Fatal(err)
			}
			const batch = 64
			obs := randObs(3, batch, cfg.ObsDim)
			got := infer(t, p, obs)
			want := reference(t, cfg, params, obs)
			a := cfg.ActionDim
			for i := range batch {
				if got.Values.Data[i] != want.Values[i] {
					t.Fatalf("row %d: value %v, want %v", i, got.Values.Data[i], want.Values[i])
				}
				if cfg.Head == nn.Gaussian {
					mean := want.Mean[i*a : (i+1)*a]
					if !slices.Equal(got.ContActions.Row(i), mean) {
						t.Fatalf("row %d: action %v, want the mean %v", i, got.ContActions.Row(i), mean)
					}
					if lp := nn.GaussianLogProb(mean, want.LogStd, mean); got.LogProbs.Data[i] != lp {
						t.Fatalf("row %d: log-prob %v, want %v", i, got.LogProbs.Data[i], lp)
					}
					continue
				}
				logits := want.Logits[i*a : (i+1)*a]
				best := 0
				for j, v := range logits {
					if v > logits[best] {
						best = j
					}
				}
				if got.Actions.Data[i] != int32(best) {
					t.Fatalf("row %d: action %d, want argmax %d of %v", i, got.Actions.Data[i], best, logits)
				}
				if lp := nn.CategoricalLogProb(logits, int32(best)); got.LogProbs.Data[i] != lp {
					t.Fatalf("row %d: log-prob %v, want %v", i, got.LogProbs.Data[i], lp)
				}
			}
		})
	}
}

// TestSampleFrequencies draws many actions for one observation and checks
// that their frequencies follow the softmax of the logits, and that the
// reported log-probabilities are those of the drawn actions.
func TestSampleFrequencies(t *testing.T) {
	cfg := policy.Config{ObsDim: 3, ActionDim: 4, Head: nn.Categorical, Hidden: []int{8}, Seed: 11}
	p := newPolicy(t, cfg)
	params := make([]float32, p.NumParams())
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range params {
		params[i] = float32(rng.NormFloat64())
	}
	if err := p.SetParams(1, params); err != nil {
		t.Fatal(err)
	}
	const batch = 40_000
	one := []float32{0.3, -1.2, 0.8}
	obs := api.NewTensor[float32](batch, cfg.ObsDim)
	for i := range batch {
		copy(obs.Row(i), one)
	}
	logits := reference(t, cfg, params, api.Tensor[float32]{Shape: []int{1, 3}, Data: one}).Logits
	out := infer(t, p, obs)
	counts := make([]int, cfg.ActionDim)
	for i, a := range out.Actions.Data {
		counts[a]++
		if want := nn.CategoricalLogProb(logits, a); math.Abs(float64(out.LogProbs.Data[i]-want)) > 1e-5 {
			t.Fatalf("row %d: log-prob %v of action %d, want %v", i, out.LogProbs.Data[i], a, want)
		}
	}
	for a, n := range counts {
		want := math.Exp(float64(nn.CategoricalLogProb(logits, int32(a))))
		got := float64(n) / batch
		// Five standard errors of a binomial proportion: a correct sampler
		// fails this about once in a million runs.
		if tol := 5 * math.Sqrt(want*(1-want)/batch); math.Abs(got-want) > tol {
			t.Errorf("action %d: frequency %.4f, want %.4f ± %.4f", a, got, want, tol)
		}
	}
}

func TestGaussianSampleSpread(t *testing.T) {
	p := newPolicy(t, box) // log-std starts at 0: unit standard deviation
	const batch = 20_000
	obs := api.NewTensor[float32](batch, box.ObsDim)
	mean := reference(t, box, nil, api.NewTensor[float32](1, box.ObsDim)).Mean
	out := infer(t, p, obs)
	for j := range box.ActionDim {
		var s, s2 float64
		for i := range batch {
			d := float64(out.ContActions.Row(i)[j] - mean[j])
			s += d
			s2 += d * d
		}
		m, v := s/batch, s2/batch
		if math.Abs(m) > 0.05 || math.Abs(v-1) > 0.05 {
			t.Errorf("dimension %d: deviation from the mean has mean %.3f variance %.3f, want 0 and 1", j, m, v)
		}
	}
}

func TestSetParams(t *testing.T) {
	p := newPolicy(t, cartPole)
	v0, initial := p.Params()
	if v0 != 0 || p.Version() != 0 {
		t.Fatalf("initial version %d/%d, want 0", v0, p.Version())
	}
	if want := newPolicy(t, cartPole).Net().Params(); !slices.Equal(initial, want) {
		t.Fatal("version 0 parameters differ between policies with the same seed")
	}
	initial[0] = 42 // Params is a copy
	if _, again := p.Params(); again[0] == 42 {
		t.Fatal("Params returned the network's own storage")
	}

	next := make([]float32, p.NumParams())
	for i := range next {
		next[i] = float32(i%7) * 0.01
	}
	if err := p.SetParams(5, next); err != nil {
		t.Fatal(err)
	}
	next[0] = 42 // SetParams copied
	v, got := p.Params()
	if v != 5 || p.Version() != 5 || got[0] == 42 || !slices.Equal(got[1:], next[1:]) {
		t.Fatalf("after SetParams(5): version %d, params differ from what was set", v)
	}
	if out := infer(t, p, randObs(1, 2, 4)); out.Version != 5 {
		t.Errorf("Infer reports version %d, want 5", out.Version)
	}

	bad := []struct {
		name   string
		params []float32
	}{
		{"too short", next[:len(next)-1]},
		{"too long", append(slices.Clone(next), 0)},
		{"empty", nil},
		{"NaN", func() []float32 { c := slices.Clone(next); c[3] = float32(math.NaN()); return c }()},
		{"Inf", func() []float32 { c := slices.Clone(next); c[9] = float32(math.Inf(-1)); return c }()},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if err := p.SetParams(6, tt.params); err == nil {
				t.Fatal("SetParams accepted bad parameters")
			}
			if v, got := p.Params(); v != 5 || got[1] != next[1] {
				t.Errorf("a rejected SetParams changed the policy (version %d)", v)
			}
		})
	}
}

// TestInferReusesOutput checks that steady-state inference does not
// allocate, and that switching an Inference between a categorical and a
// Gaussian policy leaves exactly one action tensor set.
func TestInferReusesOutput(t *testing.T) {
	cat, gauss := newPolicy(t, cartPole), newPolicy(t, box)
	catObs, gaussObs := randObs(1, 8, cartPole.ObsDim), randObs(1, 8, box.ObsDim)
	var out api.Inference
	if err := gauss.Infer(gaussObs, &out); err != nil {
		t.Fatal(err)
	}
	if err := cat.Infer(catObs, &out); err != nil {
		t.Fatal(err)
	}
	if !out.ContActions.IsZero() || out.Actions.Len() != 8 {
		t.Fatalf("after a categorical Infer: ContActions %v, Actions %v", out.ContActions.Shape, out.Actions.Shape)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := cat.Infer(catObs, &out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Infer allocates %v times per call, want 0", allocs)
	}
	if err := gauss.Infer(gaussObs, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Actions.IsZero() || out.ContActions.Len() != 16 {
		t.Fatalf("after a Gaussian Infer: Actions %v, ContActions %v", out.Actions.Shape, out.ContActions.Shape)
	}
}

func TestConfigWithShape(t *testing.T) {
	base := policy.Config{ObsDim: 4, ActionDim: 2, Hidden: []int{64, 64}, Activation: nn.Tanh}
	cases := []struct {
		name   string
		hidden []int
		act    nn.Activation
		want   policy.Config
	}{
		{"nothing given keeps both", nil, "", base},
		{"hidden given", []int{8}, "", policy.Config{ObsDim: 4, ActionDim: 2, Hidden: []int{8}, Activation: nn.Tanh}},
		{"empty hidden is a linear policy", []int{}, nn.ReLU, policy.Config{ObsDim: 4, ActionDim: 2, Hidden: []int{}, Activation: nn.ReLU}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := base.WithShape(c.hidden, c.act)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestInferThreads checks that a batch split over several goroutines gets
// the answers of one: the same actions, and values and log-probabilities
// equal to float32 rounding (a BLAS may order a sum differently for a part
// than for the whole), for batches that split and batches too small to.
func TestInferThreads(t *testing.T) {
	wide := policy.Config{ObsDim: 9, ActionDim: 5, Head: nn.Categorical, Hidden: []int{128, 96}, Seed: 3}
	greedy := cartPole
	greedy.Deterministic = true
	for _, cfg := range []policy.Config{cartPole, greedy, box, wide, small} {
		for _, threads := range []int{2, 3, 8} {
			for _, batch := range []int{1, 63, 128, 129, 500, 4097} {
				name := fmt.Sprintf("%s/det=%v/hidden=%v/conv=%v/threads=%d/batch=%d", cfg.Head, cfg.Deterministic, cfg.Hidden, cfg.Conv, threads, batch)
				t.Run(name, func(t *testing.T) {
					obs := randObs(uint64(batch), batch, cfg.ObsDim)
					par := cfg
					par.Threads = threads
					one, many := newPolicy(t, cfg), newPolicy(t, par)
					for call := range 2 {
						a, b := infer(t, one, obs), infer(t, many, obs)
						if !slices.Equal(a.Actions.Data, b.Actions.Data) {
							t.Fatalf("call %d: actions differ", call)
						}
						for _, pair := range [][2][]float32{{a.Values.Data, b.Values.Data}, {a.LogProbs.Data, b.LogProbs.Data}, {a.ContActions.Data, b.ContActions.Data}} {
							for i := range pair[0] {
								if d := math.Abs(float64(pair[0][i] - pair[1][i])); d > 1e-5*max(1, math.Abs(float64(pair[0][i]))) {
									t.Fatalf("call %d: row value %d: %v with one thread, %v with %d", call, i, pair[0][i], pair[1][i], threads)
								}
							}
						}
					}
				})
			}
		}
	}
}
