package policy_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
)

// boxEnv is a minimal environment with a continuous action space; the
// built-in environments are all discrete.
type boxEnv struct{ closed *bool }

func (boxEnv) Reset(int64) ([][]float32, error)    { return [][]float32{make([]float32, 6)}, nil }
func (boxEnv) Step([]api.Action) (api.Step, error) { return api.Step{}, api.ErrNeedsReset }
func (boxEnv) ObservationSpace() api.Space         { return api.NewBox(-1, 1, 2, 3) }
func (boxEnv) ActionSpace() api.Space              { return api.NewBox(-2, 2, 3) }
func (boxEnv) Agents() []string                    { return []string{"agent_0"} }
func (e boxEnv) Close() error                      { *e.closed = true; return nil }

var boxEnvClosed bool

func init() {
	if err := env.Register(); err != nil {
		panic(err)
	}
	if err := api.RegisterEnv("policytest/box", func(map[string]any) (api.Env, error) {
		return boxEnv{&boxEnvClosed}, nil
	}); err != nil {
		panic(err)
	}
}

func TestConfigForEnv(t *testing.T) {
	tests := []struct {
		env  string
		cfg  map[string]any
		want policy.Config
	}{
		{env.CartPoleName, nil, policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical}},
		{env.CartPoleName, map[string]any{"max_episode_steps": 100}, policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical}},
		{env.SimpleSpreadName, nil, policy.Config{ObsDim: 14, ActionDim: 5, Head: nn.Categorical}},
		{"policytest/box", nil, policy.Config{ObsDim: 6, ActionDim: 3, Head: nn.Gaussian}},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, err := policy.ConfigForEnv(tt.env, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.ObsDim != tt.want.ObsDim || got.ActionDim != tt.want.ActionDim || got.Head != tt.want.Head {
				t.Errorf("got obs %d action %d head %q, want %d %d %q",
					got.ObsDim, got.ActionDim, got.Head, tt.want.ObsDim, tt.want.ActionDim, tt.want.Head)
			}
			if !slices.Equal(got.Hidden, policy.DefaultHidden) || got.Activation != nn.Tanh || got.Deterministic {
				t.Errorf("defaults: hidden %v activation %q deterministic %v", got.Hidden, got.Activation, got.Deterministic)
			}
			if _, err := policy.New(got); err != nil {
				t.Errorf("New(ConfigForEnv): %v", err)
			}
		})
	}
	if !boxEnvClosed {
		t.Error("ConfigForEnv did not close its environment")
	}
}

func TestConfigForEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  string
		cfg  map[string]any
		want error
	}{
		{"unknown env", "NoSuchEnv-v0", nil, api.ErrUnknownEnv},
		{"bad env config", env.CartPoleName, map[string]any{"max_episode_steps": -1}, nil},
		{"unknown env key", env.CartPoleName, map[string]any{"gravity": 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policy.ConfigForEnv(tt.env, tt.cfg)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want an error (wrapping %v)", err, tt.want)
			}
		})
	}
}

// TestActionMaskFromEnv: a policy for connect4 takes the game's action
// mask, and neither samples nor (deterministic) picks a full column.
func TestActionMaskFromEnv(t *testing.T) {
	cfg, err := policy.ConfigForEnv(env.Connect4Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ActionMask) != cfg.ActionDim {
		t.Fatalf("action mask %v for %d actions", cfg.ActionMask, cfg.ActionDim)
	}
	if c, _ := policy.ConfigForEnv(env.CartPoleName, nil); c.ActionMask != nil {
		t.Errorf("cartpole has an action mask: %v", c.ActionMask)
	}
	g, err := env.NewConnect4("")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := g.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	// Columns 0, 3 and 6 full: every move but 1, 2, 4 and 5 is masked.
	for _, col := range []int32{0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 6, 6, 6, 6, 6, 6} {
		s, err := g.Step([]api.Action{{Discrete: col}, {Discrete: col}})
		if err != nil || s.Done() {
			t.Fatalf("filling the columns: %v, done %v", err, s.Done())
		}
		obs = s.Obs
	}
	const rows = 256
	batch := api.NewTensor[float32](rows, cfg.ObsDim)
	for r := range rows {
		copy(batch.Row(r), obs[r%2])
	}
	for _, deterministic := range []bool{false, true} {
		c := cfg
		c.Deterministic = deterministic
		p, err := policy.New(c)
		if err != nil {
			t.Fatal(err)
		}
		var out api.Inference
		if err := p.Infer(batch, &out); err != nil {
			t.Fatal(err)
		}
		seen := map[int32]bool{}
		for r, a := range out.Actions.Data {
			if a == 0 || a == 3 || a == 6 {
				t.Fatalf("deterministic=%v row %d: the full column %d", deterministic, r, a)
			}
			seen[a] = true
		}
		if !deterministic && len(seen) != 4 {
			t.Errorf("sampling played columns %v, want all four open ones", seen)
		}
	}
}
