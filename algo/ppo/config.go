package ppo

import (
	"errors"
	"fmt"
	"math"
)

// Config holds PPO's hyperparameters. Start from [DefaultConfig]: the zero
// Config is invalid (no epochs, no learning rate).
type Config struct {
	// Gamma is the discount factor and Lambda the GAE parameter, both in
	// [0, 1].
	Gamma  float64 `msgpack:"gamma"`
	Lambda float64 `msgpack:"lambda"`
	// ClipEps is the ε of the clipped surrogate: the ratio is clipped to
	// [1-ε, 1+ε]. It also bounds the value change when ClipValueLoss is
	// set, as in CleanRL.
	ClipEps float64 `msgpack:"clip_eps"`
	// ValueCoef and EntropyCoef weight the value loss and the entropy
	// bonus in the total loss.
	ValueCoef   float64 `msgpack:"value_coef"`
	EntropyCoef float64 `msgpack:"entropy_coef"`
	// LR is Adam's learning rate and AdamEps its epsilon (PPO baselines use
	// 1e-5, not Adam's usual 1e-8).
	LR      float64 `msgpack:"lr"`
	AdamEps float64 `msgpack:"adam_eps"`
	// LRDecayUpdates, if positive, decays the learning rate linearly as in
	// CleanRL's annealing: update u (counting from 0) uses
	// LR·(1 - u/LRDecayUpdates), and updates past the horizon use 0. Zero
	// keeps LR constant.
	LRDecayUpdates int64 `msgpack:"lr_decay_updates"`
	// Epochs is the number of passes over the samples of one update.
	Epochs int `msgpack:"epochs"`
	// MinibatchSize is the target number of samples per gradient step. An
	// update of N samples takes ceil(N/MinibatchSize) steps per epoch on
	// minibatches whose sizes differ by at most one, so that no step is
	// made on a tiny leftover.
	MinibatchSize int `msgpack:"minibatch_size"`
	// MaxGradNorm clips the gradient's Euclidean norm before each step; 0
	// disables clipping.
	MaxGradNorm float64 `msgpack:"max_grad_norm"`
	// NormalizeAdvantages standardises the advantages of each update to
	// zero mean and unit variance.
	NormalizeAdvantages bool `msgpack:"normalize_advantages"`
	// ClipValueLoss uses max((V-R)², (V_clip-R)²) with V_clip the new value
	// kept within ClipEps of the value recorded by the actor.
	ClipValueLoss bool `msgpack:"clip_value_loss"`
	// TargetKL, if positive, ends an update early after the first epoch
	// whose mean approximate KL divergence exceeds it. Zero disables it.
	TargetKL float64 `msgpack:"target_kl"`
	// Seed seeds the generator that shuffles samples into minibatches.
	Seed int64 `msgpack:"seed"`
}

// DefaultConfig returns CleanRL's PPO settings for classic control, with a
// constant learning rate and no entropy bonus (CartPole needs none). On
// CartPole with 1024-step updates, a learning rate ten times higher
// (2.5e-3) annealed to 0 learns about twice as fast; the default stays
// conservative for larger networks and harder tasks.
func DefaultConfig() Config {
	return Config{
		Gamma:               0.99,
		Lambda:              0.95,
		ClipEps:             0.2,
		ValueCoef:           0.5,
		EntropyCoef:         0,
		LR:                  2.5e-4,
		AdamEps:             1e-5,
		Epochs:              4,
		MinibatchSize:       128,
		MaxGradNorm:         0.5,
		NormalizeAdvantages: true,
	}
}

// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
var ErrInvalidConfig = errors.New("invalid config")

// Validate reports whether c is usable.
func (c Config) Validate() error {
	// Each check is written so that NaN fails it.
	checks := []struct {
		ok   bool
		what string
		val  any
	}{
		{c.Gamma >= 0 && c.Gamma <= 1, "Gamma must be in [0, 1]", c.Gamma},
		{c.Lambda >= 0 && c.Lambda <= 1, "Lambda must be in [0, 1]", c.Lambda},
		{c.ClipEps > 0 && !math.IsInf(c.ClipEps, 0), "ClipEps must be positive and finite", c.ClipEps},
		{c.ValueCoef >= 0 && !math.IsInf(c.ValueCoef, 0), "ValueCoef must be non-negative and finite", c.ValueCoef},
		{c.EntropyCoef >= 0 && !math.IsInf(c.EntropyCoef, 0), "EntropyCoef must be non-negative and finite", c.EntropyCoef},
		// Adam works in float32: a rate that rounds to 0 or overflows is a
		// mistake, not a setting.
		{c.LR > 0 && float32(c.LR) > 0 && !math.IsInf(float64(float32(c.LR)), 0), "LR must be positive and fit a float32", c.LR},
		{c.AdamEps > 0 && float32(c.AdamEps) > 0 && !math.IsInf(float64(float32(c.AdamEps)), 0), "AdamEps must be positive and fit a float32", c.AdamEps},
		{c.LRDecayUpdates >= 0, "LRDecayUpdates must be non-negative", c.LRDecayUpdates},
		{c.Epochs >= 1, "Epochs must be at least 1", c.Epochs},
		{c.MinibatchSize >= 1, "MinibatchSize must be at least 1", c.MinibatchSize},
		{c.MaxGradNorm >= 0 && !math.IsInf(c.MaxGradNorm, 0), "MaxGradNorm must be non-negative and finite", c.MaxGradNorm},
		{c.TargetKL >= 0 && !math.IsInf(c.TargetKL, 0), "TargetKL must be non-negative and finite", c.TargetKL},
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("ppo: %w: %s, got %v", ErrInvalidConfig, ch.what, ch.val)
		}
	}
	return nil
}

// lrAt returns the learning rate of update u (counting from 0).
func (c Config) lrAt(u int64) float64 {
	if c.LRDecayUpdates <= 0 {
		return c.LR
	}
	frac := 1 - float64(u)/float64(c.LRDecayUpdates)
	return c.LR * max(frac, 0)
}
