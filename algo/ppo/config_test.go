package ppo

import (
	"errors"
	"math"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	nan := math.NaN()
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"zero config", func(c *Config) { *c = Config{} }},
		{"gamma above 1", func(c *Config) { c.Gamma = 1.01 }},
		{"negative lambda", func(c *Config) { c.Lambda = -0.1 }},
		{"nan lambda", func(c *Config) { c.Lambda = nan }},
		{"zero clip", func(c *Config) { c.ClipEps = 0 }},
		{"infinite clip", func(c *Config) { c.ClipEps = math.Inf(1) }},
		{"negative value coef", func(c *Config) { c.ValueCoef = -1 }},
		{"nan entropy coef", func(c *Config) { c.EntropyCoef = nan }},
		{"zero lr", func(c *Config) { c.LR = 0 }},
		{"lr underflows float32", func(c *Config) { c.LR = 1e-50 }},
		{"lr overflows float32", func(c *Config) { c.LR = 1e39 }},
		{"zero adam eps", func(c *Config) { c.AdamEps = 0 }},
		{"negative decay", func(c *Config) { c.LRDecayUpdates = -1 }},
		{"zero epochs", func(c *Config) { c.Epochs = 0 }},
		{"zero minibatch", func(c *Config) { c.MinibatchSize = 0 }},
		{"negative grad norm", func(c *Config) { c.MaxGradNorm = -0.5 }},
		{"nan target kl", func(c *Config) { c.TargetKL = nan }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

func TestLRSchedule(t *testing.T) {
	c := DefaultConfig()
	c.LR = 1
	tests := []struct {
		decay, update int64
		want          float64
	}{
		{0, 0, 1},
		{0, 1000, 1},
		{4, 0, 1},
		{4, 1, 0.75},
		{4, 3, 0.25},
		{4, 4, 0},
		{4, 10, 0},
	}
	for _, tt := range tests {
		c.LRDecayUpdates = tt.decay
		if got := c.lrAt(tt.update); got != tt.want {
			t.Errorf("decay %d, update %d: lr = %v, want %v", tt.decay, tt.update, got, tt.want)
		}
	}
}
