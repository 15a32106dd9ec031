package ppo

import (
	"strconv"
	"testing"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
)

// BenchmarkPPOUpdate measures Update on 1024 CartPole samples (8
// environments × 128 steps of a fresh sampling policy, cut at episode
// ends) with the default 4 epochs, at several minibatch sizes. samples/s
// counts each sample once per update, although each epoch passes over it.
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
	for _, mbs := range []int{64, 256, 1024} {
		b.Run("minibatch="+strconv.Itoa(mbs), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.MinibatchSize = mbs
			l, err := NewLearner(pol.Net().Clone(), cfg)
			if err != nil {
				b.Fatal(err)
			}
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
