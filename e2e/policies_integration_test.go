package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
)

// spread-teams-ppo, two policies in one trial: simple_spread's agent_0 on
// red, agents 1 and 2 on blue, each with its own trainer, policy worker
// and sample stream. Each trainer takes only its agents' samples, and both
// learn: their mean returns rise from the untrained start.
func TestStartSpreadTeamsTwoPolicies(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "spread-teams-ppo", "t8", "--workdir", work,
		"--set", "stop.env_steps=0", "--set", "stop.wall_time=8m", "--set", "metrics_interval=500ms")
	waitOutput(t, p, regexp.MustCompile(`all 6 workers running`), 60*time.Second)
	dir := filepath.Join(work, "spread-teams-ppo", "t8")
	metrics := filepath.Join(dir, "metrics.jsonl")

	// Both learn: each trainer's mean return, over its last 10 metrics
	// lines once 500k env steps are done, stands well above the untrained
	// start, the mean return of the trainers' initial network (seed 0)
	// over 200 episodes played here. A line's mean covers 20 episodes,
	// about 9 apart from line to line; the start is about -230 and PPO
	// gains about 30 in its first 0.5M env steps (docs/spread.md).
	start := untrainedSpreadReturn(t, 200)
	const steps, last, gain = 500_000, 10, 15
	var lines []metricsLine
	eventually.NoError(t, 5*time.Minute, fmt.Sprintf("%d env steps", steps), func() error {
		lines = readMetricsLines(t, metrics)
		if n := len(lines); n == 0 || lines[n-1].EnvSteps < steps {
			return fmt.Errorf("%d lines", n)
		}
		return nil
	})
	for _, tr := range []string{"trainer-red/0", "trainer-blue/0"} {
		var returns []float64
		for _, l := range lines {
			if r, ok := l.Workers[tr]["mean_return"].(float64); ok {
				returns = append(returns, r)
			}
		}
		if len(returns) < last {
			t.Fatalf("%s reported a mean return on %d lines", tr, len(returns))
		}
		end := mean(returns[len(returns)-last:])
		t.Logf("%s: mean return %.1f (untrained: %.1f)", tr, end, start)
		if end < start+gain {
			t.Errorf("%s: mean return %.1f after %d env steps, untrained %.1f: want a gain of %d or more", tr, end, lines[len(lines)-1].EnvSteps, start, gain)
		}
	}

	rec := readRecord(t, dir)
	env := []string{"RLCTL_NAMERESOLVE=" + rec.NameResolve, "RLCTL_EXPERIMENT=spread-teams-ppo", "RLCTL_TRIAL=t8"}
	for tr, want := range map[string][]string{"trainer-red/0": {"agent_0"}, "trainer-blue/0": {"agent_1", "agent_2"}} {
		out, code := runRlctl(t, env, "request", tr, "stats")
		if code != 0 {
			t.Fatalf("rlctl request %s stats: %d %s", tr, code, out)
		}
		var st struct {
			Policy   string   `json:"policy"`
			Agents   []string `json:"agents"`
			Rejected int64    `json:"rejected"`
			Trained  int64    `json:"samples_trained"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%s stats %q: %v", tr, out, err)
		}
		if !slices.Equal(st.Agents, want) || st.Rejected != 0 || st.Trained == 0 {
			t.Errorf("%s (policy %s) took batches of agents %v (rejected %d, trained %d), want %v only", tr, st.Policy, st.Agents, st.Rejected, st.Trained, want)
		}
	}
	if out, code := runRlctl(t, env, "request", "ctl", "exit"); code != 0 {
		t.Fatalf("rlctl request ctl exit: %d %s", code, out)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	assertWorkersGone(t, readRecord(t, dir))
	// Each group's workers are named, logged and checkpointed apart.
	for _, path := range []string{"logs/trainer-red-0.log", "logs/policy-blue-0.log", "checkpoints/trainer-red", "checkpoints/trainer-blue"} {
		if _, err := os.Stat(filepath.Join(dir, path)); err != nil {
			t.Error(err)
		}
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// connect4-selfplay-ppo end to end, briefly: the trainer keeps versions
// tagged pool, the pool's actor draws player_1's from them per game, both
// evaluators record their win rates in the versions' metadata, the
// scripted one tags the best, which metrics.jsonl names; the kept
// versions outlive the run (versions.json) and `rlctl versions` lists
// them.
func TestStartConnect4SelfPlay(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "connect4-selfplay-ppo", "t9", "--workdir", work,
		"--set", "stop.wall_time=5m", "--set", "metrics_interval=500ms",
		"--set", "workers.eval-random.config.episodes=20", "--set", "workers.eval-scripted.config.episodes=20",
		"--set", "workers.trainer.config.batch_steps=1024", "--set", "workers.trainer.config.keep_every=5")
	waitOutput(t, p, regexp.MustCompile(`all 7 workers running`), 60*time.Second)
	dir := filepath.Join(work, "connect4-selfplay-ppo", "t9")
	var last metricsLine
	eventually.NoError(t, 3*time.Minute, "3 versions evaluated against both opponents, a best one", func() error {
		lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
		if len(lines) == 0 {
			return fmt.Errorf("no metrics")
		}
		last = lines[len(lines)-1]
		for _, e := range []string{"eval-random/0", "eval-scripted/0"} {
			if n, _ := last.Workers[e]["evaluated"].(float64); n < 3 {
				return fmt.Errorf("%s evaluated %v", e, last.Workers[e]["evaluated"])
			}
		}
		if last.Workers["eval-scripted/0"]["best_version"] == nil {
			return fmt.Errorf("no best version")
		}
		return nil
	})
	rec := readRecord(t, dir)
	env := []string{"RLCTL_NAMERESOLVE=" + rec.NameResolve, "RLCTL_EXPERIMENT=connect4-selfplay-ppo", "RLCTL_TRIAL=t9"}
	out, code := runRlctl(t, env, "request", "actor-pool/0", "stats")
	if code != 0 {
		t.Fatalf("actor-pool/0 stats: %d %s", code, out)
	}
	var actor struct {
		Policies map[string]struct {
			Draws   int64            `json:"pool_draws"`
			Version map[string]int64 `json:"pool_draws_by_version"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &actor); err != nil {
		t.Fatal(err)
	}
	if pool := actor.Policies["c4-pool"]; pool.Draws < 2 || len(pool.Version) < 2 {
		t.Errorf("actor-pool/0 drew player_1's version %d times from %v, want two versions or more", pool.Draws, pool.Version)
	}
	if out, code := runRlctl(t, env, "request", "ctl", "exit"); code != 0 {
		t.Fatalf("rlctl request ctl exit: %d %s", code, out)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	// The records outlived the run in versions.json; the metadata of the
	// versions evaluated holds both evaluations, the best one its tag.
	var saved []struct{ Key, Value string }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "versions.json"))), &saved); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range saved {
		for _, suffix := range []string{"/meta/eval_random_win_rate", "/meta/eval_scripted_win_rate", "/tag/best", "/tag/pool"} {
			if strings.HasSuffix(e.Key, suffix) {
				have[suffix] = true
			}
		}
	}
	if len(have) != 4 {
		t.Errorf("versions.json has %v of the win rates and tags, want all four kinds:\n%v", have, saved)
	}
	if last.BestVersion == nil {
		t.Errorf("metrics.jsonl names no best version: %+v", last)
	}
}

// untrainedSpreadReturn is the mean team return of spread-teams-ppo's
// untrained network (the trainers' seed 0, actions sampled) over episodes
// of simple_spread with MAPPO's reward, every agent on it.
func untrainedSpreadReturn(t *testing.T, episodes int) float64 {
	t.Helper()
	cfg := map[string]any{"reward": "mappo"}
	p := workertest.NewPolicy(t, env.SimpleSpreadName, cfg)
	pc := p.Config()
	e, err := api.NewEnv(env.SimpleSpreadName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	n := len(e.Agents())
	obs := api.NewTensor[float32](n, pc.ObsDim)
	var out api.Inference
	actions := make([]api.Action, n)
	total := 0.0
	for ep := range episodes {
		o, err := e.Reset(int64(ep))
		if err != nil {
			t.Fatal(err)
		}
		for {
			for i := range o {
				copy(obs.Data[i*pc.ObsDim:], o[i])
			}
			if err := p.Infer(obs, &out); err != nil {
				t.Fatal(err)
			}
			for i := range actions {
				actions[i] = api.Action{Discrete: out.Actions.Data[i]}
			}
			s, err := e.Step(actions)
			if err != nil {
				t.Fatal(err)
			}
			total += float64(s.Rewards[0])
			if s.Done() {
				break
			}
			o = s.Obs
		}
	}
	return total / float64(episodes)
}
