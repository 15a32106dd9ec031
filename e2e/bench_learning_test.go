package e2e

import (
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
