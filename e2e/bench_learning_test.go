package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// learnBenchSeeds are the seeds BenchmarkLearnCartPole runs; it reports
// medians, since one run's time to solve varies with the seed and with
// scheduling.
var learnBenchSeeds = []int64{1, 2, 3, 4, 5}

// BenchmarkLearnCartPole measures learning through the distributed
// pipeline: a trainer, a policy worker and two actors (rings of 2), each
// an `rlctl worker` process, with the configuration of
// TestLearnsCartPoleProcesses, run once per seed until the trainer's mean
// return over the last 20 episodes reaches 475. Like the pipeline
// benchmarks it times itself rather than b.N operations: one iteration is
// every seed's run, and b.N above 1 repeats them.
//
// Metrics, each the median over the seeds:
//
//	s-to-475          wall seconds from the first start to solved
//	steps-to-475      environment steps the actors took by then (including
//	                  those of batches the trainer dropped as stale)
//	trainer-samples/s agent steps per second that went into updates
//	lag-p50, lag-p99  policy lag (trainer version - batch version) of the
//	                  batches the trainer received, over its last 1000
//	updates           PPO updates to solve
func BenchmarkLearnCartPole(b *testing.B) {
	c := newCluster(b)
	b.StopTimer() // only the runs are timed, not the name server's start
	var results []learnResult
	for range b.N {
		for _, seed := range learnBenchSeeds {
			r := benchLearn(b, c.benchTrial(b), seed)
			b.Logf("seed %d: %.1fs, %d env steps, %d updates, %.0f trained steps/s, lag p50 %v p99 %v, %d stale batches dropped",
				seed, r.wall.Seconds(), r.envSteps, r.final.Updates, trainRate(r), deref(r.final.LagP50), deref(r.final.LagP99), r.final.DroppedStale)
			results = append(results, r)
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(medianOf(results, func(r learnResult) float64 { return r.wall.Seconds() }), "s-to-475")
	b.ReportMetric(medianOf(results, func(r learnResult) float64 { return float64(r.envSteps) }), "steps-to-475")
	b.ReportMetric(medianOf(results, trainRate), "trainer-samples/s")
	b.ReportMetric(medianOf(results, func(r learnResult) float64 { return deref(r.final.LagP50) }), "lag-p50")
	b.ReportMetric(medianOf(results, func(r learnResult) float64 { return deref(r.final.LagP99) }), "lag-p99")
	b.ReportMetric(medianOf(results, func(r learnResult) float64 { return float64(r.final.Updates) }), "updates")
}

// trainRate is the steps trained per second of the run.
func trainRate(r learnResult) float64 { return float64(r.final.Trained) / r.wall.Seconds() }

// benchLearn runs one seed in c's trial and kills its processes before
// returning, so that the next run has the machine to itself.
func benchLearn(b *testing.B, c *cluster, seed int64) learnResult {
	actors := []string{"actor/0", "actor/1"}
	order := append([]string{"trainer/0", "policy/0"}, actors...)
	procs := []*proc{c.worker("trainer", 0), c.worker("policy", 0), c.worker("actor", 0), c.worker("actor", 1)}
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}()
	panel := c.panel()
	if err := panel.Connect(ctxFor(b, 30*time.Second), order...); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	begin := time.Now()
	startInOrder(b, panel, order, learningConfigs(seed, actors, nil))
	r := learnUntilSolved(b, panel, actors, begin, 240*time.Second)
	b.StopTimer()
	return r
}

func medianOf(rs []learnResult, f func(learnResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return median(v)
}

// BenchmarkStaleDrops measures what bounded staleness costs a
// trainer-bound on-policy trial: `rlctl start minatar-breakout-ppo` to
// 250k frames, its actors' batches cut where a newer policy version starts
// acting (version_cuts, the default) or not, the two alternated b.N times
// (-benchtime 3x: three pairs), reporting the medians:
//
//	dropped-%        steps the trainer dropped as stale, of all frames
//	trained-samples  steps that went into updates
//	frames/s         the trial's env steps per second
func BenchmarkStaleDrops(b *testing.B) {
	const frames = 250000
	type result struct{ dropped, trained, rate []float64 }
	results := map[bool]*result{true: {}, false: {}}
	for i := range b.N {
		for _, cuts := range []bool{true, false} {
			work := b.TempDir()
			trial := fmt.Sprintf("b%d", i)
			p := start(b, "rlctl-start", noNameServer, "start", "minatar-breakout-ppo", trial, "--workdir", work,
				"--set", fmt.Sprintf("stop.env_steps=%d", frames), "--set", "metrics_interval=500ms",
				"--set", fmt.Sprintf("workers.actor.config.version_cuts=%v", cuts))
			if code := p.wait(b, 8*time.Minute); code != 0 {
				b.Fatalf("minatar-breakout-ppo exited with %d:\n%s", code, readFile(b, p.log))
			}
			lines := readMetricsLines(b, filepath.Join(work, "minatar-breakout-ppo", trial, "metrics.jsonl"))
			last := lines[len(lines)-1]
			trainer := last.Workers["trainer/0"]
			dropped, okD := trainer["dropped_steps"].(float64) // JSON numbers
			trained, okT := trainer["samples_trained"].(float64)
			if !okD || !okT || last.EnvSteps == 0 {
				b.Fatalf("no trainer figures in the last metrics line: %v", trainer)
			}
			r := results[cuts]
			r.dropped = append(r.dropped, 100*dropped/float64(last.EnvSteps))
			r.trained = append(r.trained, trained)
			r.rate = append(r.rate, float64(last.EnvSteps)/last.ElapsedS)
			b.Logf("version_cuts=%v run %d: %d frames in %.1f s, dropped %.1f%%, trained %.0f",
				cuts, i, last.EnvSteps, last.ElapsedS, r.dropped[len(r.dropped)-1], trained)
			os.RemoveAll(work)
		}
	}
	b.ReportMetric(0, "ns/op")
	for cuts, name := range map[bool]string{true: "cuts", false: "nocuts"} {
		r := results[cuts]
		b.ReportMetric(median(r.dropped), "dropped-%-"+name)
		b.ReportMetric(median(r.trained), "trained-samples-"+name)
		b.ReportMetric(median(r.rate), "frames/s-"+name)
	}
}
