package minatar_test

import (
	"context"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/env/minatar"
)

// TestRegistered checks the names package env registers and that their
// kwargs reach the games, through the registry as an experiment uses it.
func TestRegistered(t *testing.T) {
	if err := env.Register(); err != nil {
		t.Fatal(err)
	}
	names := api.EnvNames()
	for _, n := range []string{"minatar-asterix", "minatar-breakout", "minatar-freeway", "minatar-seaquest", "minatar-space_invaders"} {
		if !slices.Contains(names, n) {
			t.Errorf("EnvNames() = %v, missing %q", names, n)
		}
	}
	tests := []struct {
		name    string
		cfg     map[string]any
		shape   []int
		actions int
		ok      bool
	}{
		{"minatar-breakout", nil, []int{10, 10, 4}, 6, true},
		{"minatar-breakout", map[string]any{"minimal_actions": true, "sticky": 0.0}, []int{10, 10, 4}, 3, true},
		{"minatar-freeway", map[string]any{"minimal_actions": true}, []int{10, 10, 7}, 3, true},
		{"minatar-seaquest", map[string]any{"ramping": false, "sticky": 0.25}, []int{10, 10, 10}, 6, true},
		{"minatar-space_invaders", map[string]any{"minimal_actions": true}, []int{10, 10, 6}, 4, true},
		{"minatar-asterix", map[string]any{"minimal_actions": true}, []int{10, 10, 4}, 5, true},
		{"minatar-asterix", map[string]any{"sticky_prob": 0.1}, nil, 0, false},
		{"minatar-asterix", map[string]any{"ramping": "yes"}, nil, 0, false},
	}
	for _, tc := range tests {
		e, err := api.NewEnv(tc.name, tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("NewEnv(%q, %v) = %v, want ok=%v", tc.name, tc.cfg, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		if !slices.Equal(e.ObservationSpace().Shape, tc.shape) || e.ActionSpace().N != tc.actions {
			t.Errorf("%s %v: observation %v, %d actions", tc.name, tc.cfg, e.ObservationSpace().Shape, e.ActionSpace().N)
		}
	}

	// A batch of them, as an actor's ring steps it.
	b, err := api.NewEnvBatch(context.Background(), minatar.EnvName("breakout"), nil, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resets := []api.EnvReset{{Env: 0, Seed: 1}, {Env: 1, Seed: 2}, {Env: 2, Seed: 3}, {Env: 3, Seed: 4}}
	if err := b.Run(context.Background(), resets, nil); err != nil {
		t.Fatal(err)
	}
	steps := []api.EnvStep{{Env: 0, Actions: []api.Action{{Discrete: 1}}}, {Env: 3, Actions: []api.Action{{Discrete: 3}}}}
	if err := b.Run(context.Background(), nil, steps); err != nil {
		t.Fatal(err)
	}
	if len(steps[1].Result.Obs[0]) != 400 {
		t.Errorf("batch step observation of %d values", len(steps[1].Result.Obs[0]))
	}
}
