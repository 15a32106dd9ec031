package pyenv_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/pyenv"
)

// TestDocExample runs the example module of docs/python-envs.md, so the
// documented example is the one tested: it starts, describes its spaces,
// and plays episodes to their end with its info key reported.
func TestDocExample(t *testing.T) {
	code := pytest.DocCode(t, filepath.Join("..", "docs", "python-envs.md"), "## A complete example")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "my_envs.py"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "my_envs", "make_env")
	cfg.Path = []string{dir}
	cfg.Kwargs = map[string]any{"size": 3}
	h, err := pyenv.Start(context.Background(), cfg, 2, workertest.Logger(t, slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if obs, act := h.ObservationSpace(), h.ActionSpace(); obs.Size() != 2 || act.Kind != api.Discrete || act.N != 3 {
		t.Fatalf("spaces %+v %+v", obs, act)
	}
	ctx := context.Background()
	resets := []api.EnvReset{{Env: 0, Seed: 1}, {Env: 1, Seed: 2}}
	if err := h.Run(ctx, resets, nil); err != nil {
		t.Fatal(err)
	}
	obs := [][]float32{resets[0].Obs[0], resets[1].Obs[0]}
	ended := [2]bool{}
	for range 50 {
		var steps []api.EnvStep
		for i := range 2 {
			if ended[i] {
				continue
			}
			a := int32(1) // walk towards the target
			switch {
			case obs[i][1] > 0:
				a = 2
			case obs[i][1] < 0:
				a = 0
			}
			steps = append(steps, api.EnvStep{Env: i, Actions: []api.Action{{Discrete: a}}})
		}
		if len(steps) == 0 {
			break
		}
		if err := h.Run(ctx, nil, steps); err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			obs[s.Env] = s.Result.Obs[0]
			if s.Result.Done() {
				ended[s.Env] = true
				if !s.Result.Terminated[0] || s.Result.Rewards[0] != 1 {
					t.Errorf("env %d: walking to the target ended with %+v, want arrival", s.Env, s.Result)
				}
			}
		}
	}
	if !ended[0] || !ended[1] {
		t.Errorf("episodes did not end: %v", ended)
	}
	if _, ok := h.InfoMeans()["distance"]; !ok {
		t.Errorf("info means %v lack distance", h.InfoMeans())
	}
}
