package trainerworker_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/trainerworker"
)

// minAtarBatch is a sample batch of n MinAtar Breakout steps (10x10x4
// binary frames) collected by policy version v.
func minAtarBatch(rng *rand.Rand, n int, v int64) *api.SampleBatch {
	b := zeroBatch(n, v, 10, 10, 4)
	for i := range b.Obs.Data {
		if rng.IntN(10) == 0 {
			b.Obs.Data[i] = 1
		}
	}
	for i := range n {
		b.Actions.Data[i] = rng.Int32N(6)
		b.LogProbs.Data[i] = float32(math.Log(1.0 / 6))
		b.Values.Data[i] = float32(rng.NormFloat64())
	}
	return b
}

// BenchmarkTrainerIntake is a PPO trainer's work besides its learner's
// arithmetic, at minatar-breakout-ppo-cuda's size: batches of 64 MinAtar
// steps posted as fast as it takes them, updates of 8192 steps, on a
// network too small to cost anything (no convolution, 8 hidden units), so
// that what is measured is receiving, decoding, buffering and flattening
// the samples, GAE, and publishing: what a GPU trainer's process still
// does on its CPU. samples/s is steps trained.
func BenchmarkTrainerIntake(b *testing.B) {
	c := newCluster(b)
	tr := c.start(b, trainerworker.TypeName, 0)
	c.run(b, tr.Name(), map[string]any{"env": "minatar-breakout", "hidden": []int{8}, "batch_steps": 8192,
		"ppo": map[string]any{"epochs": 1, "minibatch_size": 8192}, "max_staleness": 1000, "threads": 1})
	prod := newProducer(b, c.repo)
	rng := rand.New(rand.NewPCG(1, 1))
	batches := make([]*api.SampleBatch, 16)
	for i := range batches {
		batches[i] = minAtarBatch(rng, 64, 0)
	}
	start := c.trainerStats(b, tr.Name())
	began := time.Now()
	for i := 0; i < b.N*128; i++ { // 128 batches of 64: one update each b.N
		prod.post(b, batches[i%len(batches)])
	}
	want := start.Updates + int64(b.N)
	eventually.NoError(b, time.Minute, "the updates", func() error {
		if s := c.trainerStats(b, tr.Name()); s.Updates < want {
			return fmt.Errorf("%d updates", s.Updates)
		}
		return nil
	})
	b.ReportMetric(float64(b.N*8192)/time.Since(began).Seconds(), "samples/s")
}
