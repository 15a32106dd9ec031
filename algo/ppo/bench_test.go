package ppo

import (
	"slices"
	"strconv"
	"testing"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
)

// BenchmarkPPOUpdate measures Update on 1024 CartPole samples (8
// environments × 128 steps of a fresh sampling policy, cut at episode
// ends) with the default 4 epochs, at several minibatch sizes. samples/s
// counts each sample once per update, although each epoch passes over it.
// "threads=T/minibatch=N" spreads each minibatch over T goroutines
// (Learner.SetThreads; 4 is what "auto" gives a 16-core machine).
func BenchmarkPPOUpdate(b *testing.B) {
	pol, err := policy.New(policy.Config{ObsDim: 4, ActionDim: 2, Head: nn.Categorical, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	batches, err := newCollector(b, pol, 8, 1).collect(128)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, bt := range batches {
		n += bt.Len()
	}
	cases := []struct{ minibatch, threads int }{{64, 1}, {256, 1}, {1024, 1}, {256, 2}, {1024, 2}, {256, 4}, {1024, 4}}
	for _, c := range cases {
		name := "minibatch=" + strconv.Itoa(c.minibatch)
		if c.threads > 1 {
			name = "threads=" + strconv.Itoa(c.threads) + "/" + name
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.MinibatchSize = c.minibatch
			l, err := NewLearner(pol.Net().Clone(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			l.SetThreads(c.threads)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Update(batches); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkSolveCartPole is the limit for the distributed learning figures:
// the same algorithm and hyperparameters in one goroutine, acting and
// learning in turn with no network and no stale samples. One iteration
// trains seeds 1-3 and reports the medians.
func BenchmarkSolveCartPole(b *testing.B) {
	var secs, steps []float64
	for range b.N {
		for seed := int64(1); seed <= 3; seed++ {
			r := trainCartPole(b, fastSetup(seed), cpMaxSteps)
			if !r.solved {
				b.Fatalf("seed %d: not solved within %d steps", seed, cpMaxSteps)
			}
			secs = append(secs, r.elapsed.Seconds())
			steps = append(steps, float64(r.steps))
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(secs), "s-to-475")
	b.ReportMetric(median(steps), "steps-to-475")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
