package ppo

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/internal/testsupport/grouptest"
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
				o := collective.Options{Repo: repo, Trial: names.NewTrial("ppogroup", t.Name()), Name: "trainer/default", Hash: "h"}
				errs := grouptest.Run(workertest.Ctx(t, 60*time.Second), o, size, func(ctx context.Context, g *collective.Group) error {
					l := newLearner(t, tc.spec, cfg)
					for u := range updates {
						part := data[u][g.Rank()*4/size : (g.Rank()+1)*4/size]
						if _, err := l.UpdateGroup(ctx, part, g); err != nil {
							return err
						}
					}
					params[g.Rank()] = l.Params()
					return nil
				})
				grouptest.NoErrors(t, errs)
				grouptest.SameBits(t, params)
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
// training moves the parameters. Members on engines (nn's CPU engine:
// their gradients cross to the host for the all-reduce and back) take the
// very same steps, bit for bit.
func TestGroupMinibatchesOfUnevenParts(t *testing.T) {
	repo := workertest.Repo(t)
	cfg := DefaultConfig()
	cfg.Epochs, cfg.MinibatchSize, cfg.TargetKL = 4, 16, 0.001
	const size = 3
	rows := []int{70, 3, 33}
	var runs [][][]float32
	for _, engine := range []bool{false, true} {
		params := make([][]float32, size)
		o := collective.Options{Repo: repo, Trial: names.NewTrial("ppogroup", fmt.Sprintf("uneven-%v", engine)), Name: "trainer/default", Hash: "h"}
		errs := grouptest.Run(workertest.Ctx(t, 60*time.Second), o, size, func(ctx context.Context, g *collective.Group) error {
			l := newLearner(t, cartPoleSpec, cfg)
			if engine {
				if err := l.SetEngine(nn.NewCPUEngine); err != nil {
					return err
				}
				defer l.Close()
			}
			rng := rand.New(rand.NewPCG(11, uint64(g.Rank())))
			for range 5 {
				b := randBatch(rng, cartPoleSpec, batchSpec{t: rows[g.Rank()]})
				if _, err := l.UpdateGroup(ctx, []*api.SampleBatch{b}, g); err != nil {
					return err
				}
			}
			params[g.Rank()] = slices.Clone(l.Params())
			return nil
		})
		grouptest.NoErrors(t, errs)
		grouptest.SameBits(t, params)
		runs = append(runs, params)
	}
	grouptest.SameBits(t, [][]float32{runs[0][0], runs[1][0]})
	params := runs[0]
	start := newNet(t, cartPoleSpec, 1).Params()
	changed := 0
	for i := range params[0] {
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
				gs, closeAll, err := grouptest.JoinFormed(workertest.Ctx(b, 10*time.Second), collective.Options{Repo: repo,
					Trial: names.NewTrial("ppobench", "b"), Name: fmt.Sprintf("trainer/%d", size), Hash: "h", Logger: slog.New(slog.DiscardHandler)}, size)
				if err != nil {
					b.Fatal(err)
				}
				defer closeAll()
				for r, g := range gs {
					groups[r] = g
				}
			}
			learners := make([]*Learner, size)
			for r := range learners {
				learners[r] = newLearner(b, minAtarSpec, cfg)
			}
			grouptest.Loop(b, size, func(r int) error {
				_, err := learners[r].UpdateGroup(ctx, parts[r], groups[r])
				return err
			})
			b.ReportMetric(float64(b.N)*total/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
