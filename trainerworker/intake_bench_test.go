package trainerworker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/trainerworker"
	zmq "github.com/pebbe/zmq4"
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
// does on its CPU. samples/s is steps trained, taking in and updating in
// turn (overlap=false, the CPU's default) or at once (overlap=true, a GPU
// learner's).
func BenchmarkTrainerIntake(b *testing.B) {
	for _, overlap := range []bool{false, true} {
		b.Run(fmt.Sprintf("overlap=%v", overlap), func(b *testing.B) { benchTrainerIntake(b, overlap) })
	}
}

func benchTrainerIntake(b *testing.B, overlap bool) {
	c := newCluster(b)
	tr := c.start(b, trainerworker.TypeName, 0)
	c.run(b, tr.Name(), map[string]any{"env": "minatar-breakout", "hidden": []int{8}, "batch_steps": 8192,
		"ppo": map[string]any{"epochs": 1, "minibatch_size": 8192}, "max_staleness": 1000, "threads": 1, "overlap": overlap})
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
	var end trainerStats
	eventually.NoError(b, time.Minute, "the updates", func() error {
		if end = c.trainerStats(b, tr.Name()); end.Updates < want {
			return fmt.Errorf("%d updates", end.Updates)
		}
		return nil
	})
	b.ReportMetric(float64(b.N*8192)/time.Since(began).Seconds(), "samples/s")
	reportBusy(b, start, end, time.Since(began))
}

// reportBusy reports the trainer's busy times between two stats, over
// took: loop-us/sample, its loop's time outside updates per sample
// trained (the intake's cost, whatever the learner), and learner-busy,
// the share of took its learner updated.
func reportBusy(b *testing.B, from, to trainerStats, took time.Duration) {
	if n := to.Trained - from.Trained; n > 0 {
		b.ReportMetric((to.LoopS-from.LoopS)*1e6/float64(n), "loop-us/sample")
	}
	b.ReportMetric((to.UpdateS-from.UpdateS)/took.Seconds(), "learner-busy")
}

// BenchmarkDQNTrainerIntake is an Ape-X learner's work besides its
// arithmetic at minatar-breakout-apex-cuda's size: batches of 256 MinAtar
// transitions sampled from a replay worker (prioritized, 5000 packed
// transitions, no rate limit), decoded, and their priorities sent back,
// on a network too small to cost anything, with in_flight sample requests
// waiting at the replay. samples/s is transitions trained on: with a
// learner on a GPU (525k samples/s at batch 512) this is the bound. In
// turn (overlap=false, the CPU's default) or decoding the next batch
// while an update runs (overlap=true, a GPU learner's).
func BenchmarkDQNTrainerIntake(b *testing.B) {
	for _, inFlight := range []int{2, 8} {
		for _, overlap := range []bool{false, true} {
			b.Run(fmt.Sprintf("in_flight=%d/overlap=%v", inFlight, overlap), func(b *testing.B) { benchDQNIntake(b, inFlight, overlap) })
		}
	}
}

func benchDQNIntake(b *testing.B, inFlight int, overlap bool) {
	c := newCluster(b)
	rp := c.start(b, replayworker.TypeName, 0)
	c.run(b, rp.Name(), map[string]any{"tables": []map[string]any{{"name": "default", "alpha": 0.6, "beta": 0.4,
		"limiter": map[string]any{"min_size": 256}}}})
	tr := c.start(b, trainerworker.TypeName, 0)
	c.run(b, tr.Name(), map[string]any{"algorithm": "dqn", "env": "minatar-breakout", "hidden": []int{8}, "batch_size": 256,
		"in_flight": inFlight, "eval_every": 1 << 30, "publish_every": 20, "dqn": map[string]any{"dueling": true},
		"overlap": overlap})
	cl := c.replayClient(b)
	rng := rand.New(rand.NewPCG(1, 2))
	frame := func() api.Frames {
		f := api.NewFrames(api.NewTensor[float32](10, 10, 4))
		for i := range f.Data {
			if rng.IntN(10) == 0 {
				f.Data[i] = 1
			}
		}
		return f
	}
	for range 10 {
		insertTransitions(b, cl, 500, func() localreplay.Transition {
			return localreplay.Transition{Obs: frame(), NextObs: frame(), Action: rng.Int32N(6), Discount: 0.97}
		})
	}
	updates := func() int64 {
		var s struct {
			Updates int64 `msgpack:"updates"`
		}
		c.request(b, tr.Name(), "stats", nil, &s)
		return s.Updates
	}
	eventually.True(b, 20*time.Second, "the first update", func() bool { return updates() > 0 })
	b.ResetTimer()
	from := updates()
	want := from + int64(b.N)
	before := c.trainerStats(b, tr.Name())
	eventually.True(b, 5*time.Minute, "the updates", func() bool { return updates() >= want })
	b.ReportMetric(float64((updates()-from)*256)/b.Elapsed().Seconds(), "samples/s")
	reportBusy(b, before, c.trainerStats(b, tr.Name()), b.Elapsed())
}

// BenchmarkTrainerOverlap is a PPO trainer of minatar-breakout-ppo's
// network on the CPU, fed batches of 64 MinAtar steps as fast as it takes
// them (updates of 2048 steps, one epoch of minibatches of 512), taking
// samples in and updating in turn (overlap=false) or at once
// (overlap=true). samples/s is steps trained.
func BenchmarkTrainerOverlap(b *testing.B) {
	for _, overlap := range []bool{false, true} {
		b.Run(fmt.Sprintf("overlap=%v", overlap), func(b *testing.B) {
			c := newCluster(b)
			tr := c.start(b, trainerworker.TypeName, 0)
			cfg := minAtarPPO(2048)
			cfg["overlap"] = overlap
			c.run(b, tr.Name(), cfg)
			feedMinAtarBehind(b, c.repo)
			updates := func() int64 { return c.trainerStats(b, tr.Name()).Updates }
			eventually.True(b, time.Minute, "the first update", func() bool { return updates() > 0 })
			b.ResetTimer()
			from := updates()
			eventually.True(b, 5*time.Minute, "the updates", func() bool { return updates() >= from+int64(b.N) })
			b.ReportMetric(float64((updates()-from)*2048)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// minAtarPPO is a PPO trainer of minatar-breakout-ppo's network on the
// CPU, updating every batchSteps steps in one epoch of minibatches of 512,
// whatever the staleness.
func minAtarPPO(batchSteps int) map[string]any {
	return map[string]any{"env": "minatar-breakout",
		"conv": []map[string]any{{"filters": 16, "kernel": 3, "stride": 1}}, "hidden": []int{128},
		"activation": "relu", "shared_trunk": true, "batch_steps": batchSteps,
		"ppo":           map[string]any{"epochs": 1, "minibatch_size": 512},
		"max_staleness": 1 << 30, "threads": 1}
}

// feedMinAtarBehind runs feedMinAtar (batches of 64 steps) until t ends.
func feedMinAtarBehind(t testing.TB, repo nameresolve.Repository) {
	stop := make(chan struct{})
	fed := make(chan error, 1)
	go func() { fed <- feedMinAtar(repo, stop, 64) }()
	t.Cleanup(func() {
		close(stop)
		if err := <-fed; err != nil {
			t.Error(err)
		}
	})
}

// feedMinAtar posts MinAtar batches of n steps to the sample stream until stop
// is closed, as fast as its consumer takes them: a back-pressured post
// waits for room on the socket, as an actor does.
func feedMinAtar(repo nameresolve.Repository, stop <-chan struct{}, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := stream.NewSampleProducer(ctx, stream.SampleProducerOptions{Repo: repo, Trial: testTrial})
	if err != nil {
		return err
	}
	defer p.Close()
	room := zmq.NewPoller()
	room.Add(p.Socket(), zmq.POLLOUT)
	rng := rand.New(rand.NewPCG(1, 3))
	batches := make([]*api.SampleBatch, 16)
	for i := range batches {
		batches[i] = minAtarBatch(rng, n, 0)
	}
	for i := 0; ; {
		select {
		case <-stop:
			return nil
		default:
		}
		err := p.Post(batches[i%len(batches)])
		switch {
		case err == nil:
			i++
		case errors.Is(err, stream.ErrBackpressure):
			if _, err := room.Poll(10 * time.Millisecond); err != nil {
				return err
			}
		default:
			return err
		}
	}
}
