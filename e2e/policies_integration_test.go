package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
)

// spread-teams-ppo, two policies in one trial: simple_spread's agent_0 on
// red, agents 1 and 2 on blue, each with its own trainer, policy worker
// and sample stream. Each trainer takes only its agents' samples, and both
// learn: their mean returns rise from the untrained start.
func TestStartSpreadTeamsTwoPolicies(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "spread-teams-ppo", "t8", "--workdir", work,
		"--set", "stop.env_steps=0", "--set", "stop.wall_time=5m", "--set", "metrics_interval=500ms")
	waitOutput(t, p, regexp.MustCompile(`all 6 workers running`), 60*time.Second)
	dir := filepath.Join(work, "spread-teams-ppo", "t8")
	metrics := filepath.Join(dir, "metrics.jsonl")

	// A random policy's team return is about -230 (docs/spread.md); PPO
	// gains about 30 in its first 0.5M env steps, 40 in the 400k steps of
	// two policies measured here. Each trainer's start and end are means
	// of its mean_return over 5 metrics lines (the first 5 that have one,
	// the last 5 once 300k env steps are done): a line's mean covers 20
	// episodes, about 9 apart from line to line at the start.
	const steps, lines5, gain = 300_000, 5, 20
	var lines []metricsLine
	eventually.NoError(t, 4*time.Minute, fmt.Sprintf("%d env steps", steps), func() error {
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
		if len(returns) < 2*lines5 {
			t.Fatalf("%s reported a mean return on %d lines", tr, len(returns))
		}
		first, last := mean(returns[:lines5]), mean(returns[len(returns)-lines5:])
		t.Logf("%s: mean return %.1f -> %.1f", tr, first, last)
		if last < first+gain {
			t.Errorf("%s: mean return %.1f -> %.1f over %d env steps, want a gain of %d or more", tr, first, last, lines[len(lines)-1].EnvSteps, gain)
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
