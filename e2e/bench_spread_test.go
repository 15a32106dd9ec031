package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// spreadMAPPOSteps is the env-step budget of MAPPO's Spread runs
// (marlbenchmark/on-policy, train_mpe_scripts/train_mpe_spread.sh:
// --num_env_steps 20000000), where its learning curve ends
// (docs/spread.md).
const spreadMAPPOSteps = 20_000_000

// spreadReturnWindow is how many env steps before a checkpoint the
// reported return averages over: one metrics line's mean_return covers the
// last 20 episodes only (500 env steps), MAPPO's figure a whole rollout of
// 128 episodes per point, smoothed.
const spreadReturnWindow = 500_000

// BenchmarkSpreadMAPPO runs the built-in spread-ppo through rlctl start for
// MAPPO's budget of env steps (E2E_SPREAD_STEPS shortens it, as 2000000) or
// its 20-minute wall limit, whichever comes first, and reports its return
// on MAPPO's definition (the team reward summed over agents, with the
// self-collision constant: spread-ppo trains and scores with reward:
// mappo), to hold against the figure in MAPPO's paper at the same steps.
// One iteration; b.N above 1 repeats the run and reports the last.
//
// Metrics:
//
//	team-return       mean return over the last 500k env steps of the run
//	return-at-1M/5M   the same, over the 500k env steps before 1M and 5M
//	env-steps, wall-s the run's env steps and wall seconds
//
// At full length it runs 20 minutes, so it runs only when SPREAD_BENCH=1
// (`make bench-spread`); `make bench` skips it.
func BenchmarkSpreadMAPPO(b *testing.B) {
	if os.Getenv("SPREAD_BENCH") != "1" {
		b.Skip("a 20-minute learning run: SPREAD_BENCH=1 (make bench-spread) runs it")
	}
	steps := int64(spreadMAPPOSteps)
	if s := os.Getenv("E2E_SPREAD_STEPS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("E2E_SPREAD_STEPS=%q: want a positive number of env steps", s)
		}
		steps = n
	}
	var lines []metricsLine
	for i := range b.N {
		work := b.TempDir()
		trial := fmt.Sprintf("b%d", i)
		p := start(b, "rlctl-start", noNameServer, "start", "spread-ppo", trial, "--workdir", work,
			"--set", fmt.Sprintf("stop.env_steps=%d", steps))
		if code := p.wait(b, 25*time.Minute); code != 0 {
			b.Fatalf("spread-ppo exited with %d:\n%s", code, readFile(b, p.log))
		}
		lines = readMetricsLines(b, filepath.Join(work, "spread-ppo", trial, "metrics.jsonl"))
		if len(lines) == 0 {
			b.Fatal("no metrics lines")
		}
		last := lines[len(lines)-1]
		b.Logf("run %d: %d env steps in %.0f s, team return %.1f (last 500k steps)",
			i, last.EnvSteps, last.ElapsedS, returnBefore(lines, last.EnvSteps))
		os.RemoveAll(work)
	}
	last := lines[len(lines)-1]
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(returnBefore(lines, last.EnvSteps), "team-return")
	for _, at := range []int64{1_000_000, 5_000_000} {
		if last.EnvSteps >= at {
			b.ReportMetric(returnBefore(lines, at), fmt.Sprintf("return-at-%dM", at/1_000_000))
		}
	}
	b.ReportMetric(float64(last.EnvSteps), "env-steps")
	b.ReportMetric(last.ElapsedS, "wall-s")
}

// returnBefore is the mean of the lines' mean_return over the
// spreadReturnWindow env steps up to step (the line nearest before it when
// none falls in the window).
func returnBefore(lines []metricsLine, step int64) float64 {
	var sum float64
	var n int
	var nearest *metricsLine
	for i := range lines {
		l := &lines[i]
		if l.Episodes == 0 || l.EnvSteps > step {
			continue
		}
		nearest = l
		if l.EnvSteps > step-spreadReturnWindow {
			sum += l.MeanReturn
			n++
		}
	}
	switch {
	case n > 0:
		return sum / float64(n)
	case nearest != nil:
		return nearest.MeanReturn
	}
	return 0
}
