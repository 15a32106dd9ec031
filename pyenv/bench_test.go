package pyenv_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/pyenv"
	"github.com/distrl/distrl/python"
)

// balance is env's test policy: push towards where the pole falls, so
// episodes last a while and resets do not dominate.
func balance(obs []float32) int32 {
	if obs[2]+0.5*obs[3] > 0 {
		return 1
	}
	return 0
}

// BenchmarkPythonCartPole steps the Python CartPole of the examples
// through the bridge, batch envs per message (resets of ended episodes in
// the same message, as an actor does), against the limit: the same
// environment stepped by a plain Python loop with the same policy, in a
// Python process of this run (loop). env.BenchmarkCartPoleStep is the
// built-in Go CartPole.
func BenchmarkPythonCartPole(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprint("batch=", n), func(b *testing.B) {
			cfg := pyenv.Config{Python: pytest.Python(b), Module: "distrl.examples.cartpole", Factory: "make_env",
				StartTimeout: time.Minute, StepTimeout: time.Minute}
			h, err := pyenv.Start(context.Background(), cfg, n, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			ctx := context.Background()
			resets := make([]api.EnvReset, n)
			for i := range resets {
				resets[i] = api.EnvReset{Env: i, Seed: int64(i)}
			}
			if err := h.Run(ctx, resets, nil); err != nil {
				b.Fatal(err)
			}
			obs := make([][]float32, n)
			for i, r := range resets {
				obs[i] = r.Obs[0]
			}
			steps := make([]api.EnvStep, n)
			actions := make([]api.Action, n)
			seed := int64(n)
			var done []api.EnvReset
			var total int
			b.ResetTimer()
			for total < b.N {
				for i := range steps {
					actions[i].Discrete = balance(obs[i])
					steps[i] = api.EnvStep{Env: i, Actions: actions[i : i+1]}
				}
				// The envs that ended last time are reset, not stepped.
				st := steps[:0:0]
				for _, s := range steps {
					if !ended(done, s.Env) {
						st = append(st, s)
					}
				}
				if err := h.Run(ctx, done, st); err != nil {
					b.Fatal(err)
				}
				for _, r := range done {
					obs[r.Env] = r.Obs[0]
				}
				done = done[:0]
				for _, s := range st {
					obs[s.Env] = s.Result.Obs[0]
					if s.Result.Done() {
						seed++
						done = append(done, api.EnvReset{Env: s.Env, Seed: seed})
					}
				}
				total += len(st)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "steps/s")
		})
	}
	b.Run("loop", func(b *testing.B) {
		dir, err := python.Dir()
		if err != nil {
			b.Fatal(err)
		}
		const script = `
import sys, time
from distrl.examples.cartpole import make_env
n = int(sys.argv[1])
env = make_env()
obs, _ = env.reset(seed=0)
seed = 0
t0 = time.perf_counter()
for _ in range(n):
    obs, r, term, trunc, info = env.step(1 if obs[2] + 0.5 * obs[3] > 0 else 0)
    if term or trunc:
        seed += 1
        obs, _ = env.reset(seed=seed)
print(time.perf_counter() - t0)
`
		cmd := exec.Command(pytest.Python(b), "-c", script, strconv.Itoa(b.N))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("python loop: %v\n%s", err, out)
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("python loop printed %q", out)
		}
		b.ReportMetric(float64(b.N)/secs, "steps/s")
	})
}

func ended(done []api.EnvReset, env int) bool {
	for _, r := range done {
		if r.Env == env {
			return true
		}
	}
	return false
}
