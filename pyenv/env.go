package pyenv

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/distrl/distrl/api"
)

// Name is the registry name of Python environments: `env: python` with
// env_config {module, factory, kwargs, ...} (see [ParseConfig]).
const Name = "python"

// Register adds Python environments to the api registry under [Name]: as
// an api.EnvBatch (one host for a whole batch, what actors use) and as a
// single api.Env (one host each; what policy workers and trainers use to
// read the spaces).
func Register() error {
	if err := api.RegisterEnv(Name, newEnv); err != nil {
		return err
	}
	return api.RegisterEnvBatch(Name, newBatch)
}

func newBatch(ctx context.Context, cfg map[string]any, n int, log *slog.Logger) (api.EnvBatch, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	h, err := Start(ctx, c, n, log)
	if err != nil {
		return nil, err
	}
	log.Info("python environments started", "module", c.Module, "factory", c.Factory, "n", n,
		"agents", len(h.Agents()), "pid", h.Pid())
	return h, nil
}

func newEnv(cfg map[string]any) (api.Env, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	h, err := Start(context.Background(), c, 1, slog.Default())
	if err != nil {
		return nil, err
	}
	return &Env{h: h}, nil
}

// Env is one Python environment in a host of its own, as an api.Env. It
// is an api.Turns whose Acting is nil (every agent) unless the Python
// environment takes turns, and an api.ActionMasker whose mask is nil
// unless it declares action_mask_indices (docs/python-envs.md).
type Env struct {
	h      *Host
	live   bool
	reset  [1]api.EnvReset
	step   [1]api.EnvStep
	acting []bool
}

var (
	_ api.Env          = (*Env)(nil)
	_ api.Turns        = (*Env)(nil)
	_ api.ActionMasker = (*Env)(nil)
)

// NewEnv starts a host for one environment.
func NewEnv(ctx context.Context, cfg Config, log *slog.Logger) (*Env, error) {
	h, err := Start(ctx, cfg, 1, log)
	if err != nil {
		return nil, err
	}
	return &Env{h: h}, nil
}

// Reset starts an episode.
func (e *Env) Reset(seed int64) ([][]float32, error) {
	e.reset[0] = api.EnvReset{Seed: seed}
	e.live = false
	if err := e.h.Run(context.Background(), e.reset[:], nil); err != nil {
		return nil, err
	}
	e.live, e.acting = true, e.reset[0].Acting
	return e.reset[0].Obs, nil
}

// Step applies one action per agent.
func (e *Env) Step(actions []api.Action) (api.Step, error) {
	if !e.live {
		return api.Step{}, fmt.Errorf("pyenv: Step: %w", api.ErrNeedsReset)
	}
	e.step[0] = api.EnvStep{Actions: actions}
	if err := e.h.Run(context.Background(), nil, e.step[:]); err != nil {
		return api.Step{}, err
	}
	s := e.step[0].Result
	e.live, e.acting = !s.Done(), s.Acting
	return s, nil
}

// Acting is which agents' actions the next Step applies: those the last
// Reset or Step reported, nil for every agent.
func (e *Env) Acting() []bool { return e.acting }

// ObservationSpace is one agent's observation space.
func (e *Env) ObservationSpace() api.Space { return e.h.ObservationSpace() }

// ActionSpace is one agent's action space.
func (e *Env) ActionSpace() api.Space { return e.h.ActionSpace() }

// Agents returns the agent ids.
func (e *Env) Agents() []string { return e.h.Agents() }

// ActionMask is the environment's action_mask_indices (nil: none), for a
// policy built for it (policy.ConfigForEnv).
func (e *Env) ActionMask() []int { return e.h.ActionMask() }

// Host returns the host the environment runs in.
func (e *Env) Host() *Host { return e.h }

// Close stops the host.
func (e *Env) Close() error { return e.h.Close() }
