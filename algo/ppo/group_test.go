package ppo

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/nn"
)

// minAtarSpec is MinAtar's network (policy: the conv form).
var minAtarSpec = nn.Spec{ObsDim: 400, InputShape: []int{10, 10, 4}, Conv: []nn.ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}},
	Hidden: []int{128}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 6, SharedTrunk: true}

// TestGroupMatchesOneLearner is issue 37's equivalence: a data-parallel
// group of 2 and of 4 members over a real collective (ZeroMQ on loopback),
// each given its part of every update's batches, ends 10 updates within
// 1e-5 (relative, in norm) of one learner given all the batches, and its
// members hold the same bits. One minibatch an epoch, so that the group's
// minibatch (the union of the members' parts) is the one learner's.
func TestGroupMatchesOneLearner(t *testing.T) {
	repo := workertest.Repo(t)
	for _, tc := range []struct {
		name  string
		spec  nn.Spec
		steps int // per batch; 4 batches an update
	}{
		{"cartpole", cartPoleSpec, 64},
		{"minatar", minAtarSpec, 24},
	} {
		for _, size := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/members=%d", tc.name, size), func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Epochs, cfg.MinibatchSize, cfg.TargetKL = 3, 4*tc.steps, 0
				cfg.LR = 1e-3
				const updates = 10
				rng := rand.New(rand.NewPCG(7, uint64(size)))
				data := make([][]*api.SampleBatch, updates)
				for u := range data {
					for range 4 {
						data[u] = append(data[u], randBatch(rng, tc.spec, batchSpec{t: tc.steps, terminated: []int{tc.steps / 3}}))
					}
				}
				one := newLearner(t, tc.spec, cfg)
				for u := range updates {
					if _, err := one.Update(data[u]); err != nil {
						t.Fatal(err)
					}
				}
				params := make([][]float32, size)
				ctx := workertest.Ctx(t, 60*time.Second)
				var wg sync.WaitGroup
				errs := make([]error, size)
				for rank := range size {
					wg.Go(func() {
						errs[rank] = func() error {
							g, err := collective.Join(ctx, collective.Options{Repo: repo, Trial: names.NewTrial("ppogroup", t.Name()),
								Name: "trainer/default", Rank: rank, Size: size, Hash: "h"})
							if err != nil {
								return err
							}
							defer g.Close()
							for ok := false; !ok; time.Sleep(time.Millisecond) {
								if ok, err = g.Poll(); err != nil {
									return err
								}
							}
							l := newLearner(t, tc.spec, cfg)
							for u := range updates {
								part := data[u][rank*4/size : (rank+1)*4/size]
								if _, err := l.UpdateGroup(ctx, part, g); err != nil {
									return err
								}
							}
							params[rank] = l.Params()
							return nil
						}()
					})
				}
				wg.Wait()
				for r, err := range errs {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				for r := 1; r < size; r++ {
					for i := range params[r] {
						if math.Float32bits(params[r][i]) != math.Float32bits(params[0][i]) {
							t.Fatalf("rank %d's parameter %d is %v, rank 0's %v", r, i, params[r][i], params[0][i])
						}
					}
				}
				var diff, norm, moved float64
				start := newNet(t, tc.spec, 1).Params()
				for i, want := range one.Params() {
					d := float64(params[0][i]) - float64(want)
					diff += d * d
					norm += float64(want) * float64(want)
					m := float64(want) - float64(start[i])
					moved += m * m
				}
				rel := math.Sqrt(diff / norm)
				t.Logf("relative difference %.3g after %d updates (the updates moved the parameters by %.3g relative)", rel, updates, math.Sqrt(moved/norm))
				if rel > 1e-5 {
					t.Errorf("the group's parameters are %.3g (relative) from one learner's, want at most 1e-5", rel)
				}
			})
		}
	}
}

// TestGroupMinibatchesOfUnevenParts: members with different numbers of
// rows, fewer rows than minibatches on one of them, several minibatches
// and early stopping on KL still take the same steps (the same bits), and
// training moves the parameters.
func TestGroupMinibatchesOfUnevenParts(t *testing.T) {
	repo := workertest.Repo(t)
	cfg := DefaultConfig()
	cfg.Epochs, cfg.MinibatchSize, cfg.TargetKL = 4, 16, 0.001
	const size = 3
	rows := []int{70, 3, 33}
	params := make([][]float32, size)
	errs := make([]error, size)
	ctx := workertest.Ctx(t, 60*time.Second)
	var wg sync.WaitGroup
	for rank := range size {
		wg.Go(func() {
			errs[rank] = func() error {
				g, err := collective.Join(ctx, collective.Options{Repo: repo, Trial: names.NewTrial("ppogroup", "uneven"),
					Name: "trainer/default", Rank: rank, Size: size, Hash: "h"})
				if err != nil {
					return err
				}
				defer g.Close()
				for ok := false; !ok; time.Sleep(time.Millisecond) {
					if ok, err = g.Poll(); err != nil {
						return err
					}
				}
				l := newLearner(t, cartPoleSpec, cfg)
				rng := rand.New(rand.NewPCG(11, uint64(rank)))
				for range 5 {
					b := randBatch(rng, cartPoleSpec, batchSpec{t: rows[rank]})
					if _, err := l.UpdateGroup(ctx, []*api.SampleBatch{b}, g); err != nil {
						return err
					}
				}
				params[rank] = l.Params()
				return nil
			}()
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	start := newNet(t, cartPoleSpec, 1).Params()
	changed := 0
	for i := range params[0] {
		for r := 1; r < size; r++ {
			if math.Float32bits(params[r][i]) != math.Float32bits(params[0][i]) {
				t.Fatalf("rank %d's parameter %d is %v, rank 0's %v", r, i, params[r][i], params[0][i])
			}
		}
		if params[0][i] != start[i] {
			changed++
		}
	}
	if changed < len(start)/2 {
		t.Fatalf("only %d of %d parameters changed", changed, len(start))
	}
}

// BenchmarkGroupUpdate is a data-parallel group's learning rate on
// MinAtar's network: one update of 1024 samples (minibatches of 256, the
// default epochs) by 1 learner, or by 2 and 4 members of a group over the
// collective (each a goroutine with its part of the samples and its own
// sockets, ipc between them). samples/s counts each sample once per
// update. On 2 cores the members share the cores, so this shows the
// collective's cost more than the speed-up a node of many cores gives.
func BenchmarkGroupUpdate(b *testing.B) {
	repo := workertest.Repo(b)
	const total = 1024
	for _, size := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("members=%d", size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.MinibatchSize = 256
			rng := rand.New(rand.NewPCG(5, 5))
			parts := make([][]*api.SampleBatch, size)
			for r := range parts {
				for range 4 {
					parts[r] = append(parts[r], randBatch(rng, minAtarSpec, batchSpec{t: total / size / 4}))
				}
			}
			ctx := context.Background()
			groups := make([]Reducer, size)
			if size > 1 {
				gs := make([]*collective.Group, size)
				for r := range size {
					g, err := collective.Join(ctx, collective.Options{Repo: repo, Trial: names.NewTrial("ppobench", "b"),
						Name: fmt.Sprintf("trainer/%d", size), Rank: r, Size: size, Hash: "h", Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					defer g.Close()
					gs[r] = g
				}
				for formed := 0; formed < size; time.Sleep(time.Millisecond) {
					formed = 0
					for _, g := range gs {
						if ok, err := g.Poll(); err != nil {
							b.Fatal(err)
						} else if ok {
							formed++
						}
					}
				}
				for r, g := range gs {
					groups[r] = g
				}
			}
			learners := make([]*Learner, size)
			for r := range learners {
				learners[r] = newLearner(b, minAtarSpec, cfg)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make([]error, size)
			for r := range size {
				wg.Go(func() {
					for range b.N {
						if _, err := learners[r].UpdateGroup(ctx, parts[r], groups[r]); err != nil {
							errs[r] = err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			for r, err := range errs {
				if err != nil {
					b.Fatalf("rank %d: %v", r, err)
				}
			}
			b.ReportMetric(float64(b.N)*total/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
