package policy

import (
	"fmt"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
)

// ConfigForEnv returns the Config of a policy for the environment
// registered as envName with configuration envCfg: ObsDim is the width of
// one agent's observation, and the action space picks the head (Discrete(N)
// gives a categorical head over N actions, a Box a Gaussian head of its
// size). An observation Box of three dimensions is taken for an image,
// [H, W, C] channels last, and sets ObsShape, so that a configuration
// need only add Conv (WithConv) to put convolutions in front. The rest are
// the defaults: DefaultHidden, tanh, no convolutions, seed 0, sampling.
//
// It creates a throwaway environment through [api.NewEnv] to read the
// spaces, so the environment must be registered first (env.Register for
// the built-in ones) and its configuration must be valid.
func ConfigForEnv(envName string, envCfg map[string]any) (Config, error) {
	e, err := api.NewEnv(envName, envCfg)
	if err != nil {
		return Config{}, fmt.Errorf("policy: config for env: %w", err)
	}
	obs, act := e.ObservationSpace(), e.ActionSpace()
	var mask []int
	if m, ok := e.(api.ActionMasker); ok {
		mask = append([]int(nil), m.ActionMask()...)
	}
	if err := e.Close(); err != nil {
		return Config{}, fmt.Errorf("policy: config for env %q: close: %w", envName, err)
	}
	if err := obs.Validate(); err != nil {
		return Config{}, fmt.Errorf("policy: config for env %q: observation space: %w", envName, err)
	}
	if err := act.Validate(); err != nil {
		return Config{}, fmt.Errorf("policy: config for env %q: action space: %w", envName, err)
	}
	cfg := Config{
		// Size, not Dim: the network reads the observation vector as the
		// environment produces it (a Discrete observation is one number).
		ObsDim:     obs.Size(),
		ActionDim:  act.Dim(),
		Hidden:     append([]int(nil), DefaultHidden...),
		Activation: nn.Tanh,
	}
	if obs.Kind == api.Box && len(obs.Shape) == 3 {
		cfg.ObsShape = append([]int(nil), obs.Shape...)
	}
	cfg.ActionMask = mask
	switch act.Kind {
	case api.Discrete:
		cfg.Head = nn.Categorical
	case api.Box:
		cfg.Head = nn.Gaussian
	default: // Validate accepts no other kind; kept so a new kind fails loudly
		return Config{}, fmt.Errorf("policy: config for env %q: unsupported action space %v", envName, act.Kind)
	}
	return cfg, nil
}
