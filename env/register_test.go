package env_test

import (
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
)

func TestRegister(t *testing.T) {
	for range 2 { // idempotent
		if err := env.Register(); err != nil {
			t.Fatal(err)
		}
	}
	names := api.EnvNames()
	for _, n := range []string{env.CartPoleName, env.SimpleSpreadName} {
		if !slices.Contains(names, n) {
			t.Errorf("EnvNames() = %v, missing %q", names, n)
		}
	}

	tests := []struct {
		name    string
		cfg     map[string]any
		agents  int
		obsSize int
		ok      bool
	}{
		{env.CartPoleName, nil, 1, 4, true},
		{env.CartPoleName, map[string]any{"max_episode_steps": int64(200)}, 1, 4, true},
		{env.CartPoleName, map[string]any{"max_episode_steps": 0}, 0, 0, false},
		{env.CartPoleName, map[string]any{"max_steps": 10}, 0, 0, false}, // misspelt key
		{env.SimpleSpreadName, nil, 3, 18 - 4, true},
		{env.SimpleSpreadName, map[string]any{"n_agents": uint8(4), "max_cycles": float64(50)}, 4, 4 + 8 + 6, true},
		{env.SimpleSpreadName, map[string]any{"n_agents": "4"}, 0, 0, false},
		{env.SimpleSpreadName, map[string]any{"max_cycles": 2.5}, 0, 0, false},
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
		obs, err := e.Reset(1)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Agents()) != tc.agents || len(obs) != tc.agents || e.ObservationSpace().Size() != tc.obsSize {
			t.Errorf("NewEnv(%q, %v): %d agents, %d observations of space size %d",
				tc.name, tc.cfg, len(e.Agents()), len(obs), e.ObservationSpace().Size())
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}
}
