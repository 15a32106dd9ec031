package dqn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/internal/testsupport/grouptest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/nn"
)

// TestGroupMatchesOneLearner is issue 37's equivalence for DQN: a group of
// 2 and of 4 members over a real collective (ZeroMQ on loopback), each
// given its part of every step's samples, ends 10 updates within 1e-5
// (relative, in norm) of one learner given all the samples, with hard
// target updates every 3 steps in between, on CartPole's MLP and on
// MinAtar's network with the dueling head; the members hold the same
// bits.
func TestGroupMatchesOneLearner(t *testing.T) {
	repo := workertest.Repo(t)
	cartPole := nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}
	minAtar := minAtarSpec
	for _, tc := range []struct {
		name    string
		spec    nn.Spec
		dueling bool
	}{{"cartpole", cartPole, false}, {"minatar-dueling", minAtar, true}} {
		for _, size := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/members=%d", tc.name, size), func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Dueling, cfg.TargetUpdateEvery = tc.dueling, 3
				const updates, batch = 10, 64
				rng := rand.New(rand.NewPCG(9, uint64(size)))
				data := make([]*Batch, updates)
				for u := range data {
					data[u] = groupBatch(rng, batch, tc.spec)
				}
				one, err := NewLearner(tc.spec, cfg, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range data {
					if _, _, err := one.Update(b, nil); err != nil {
						t.Fatal(err)
					}
				}
				params := make([][]float32, size)
				o := collective.Options{Repo: repo, Trial: names.NewTrial("dqngroup", t.Name()), Name: "trainer/default", Hash: "h"}
				errs := grouptest.Run(workertest.Ctx(t, 60*time.Second), o, size, func(ctx context.Context, g *collective.Group) error {
					l, err := NewLearner(tc.spec, cfg, 1)
					if err != nil {
						return err
					}
					lo, hi := g.Rank()*batch/size, (g.Rank()+1)*batch/size
					for _, b := range data {
						if _, _, err := l.UpdateGroup(ctx, b.part(lo, hi, tc.spec.ObsDim), nil, g); err != nil {
							return err
						}
					}
					params[g.Rank()] = l.Online().Params()
					return nil
				})
				grouptest.NoErrors(t, errs)
				grouptest.SameBits(t, params)
				var diff, norm float64
				for i, want := range one.Online().Params() {
					d := float64(params[0][i]) - float64(want)
					diff += d * d
					norm += float64(want) * float64(want)
				}
				rel := math.Sqrt(diff / norm)
				t.Logf("relative difference %.3g after %d updates", rel, updates)
				if rel > 1e-5 {
					t.Errorf("the group's parameters are %.3g (relative) from one learner's, want at most 1e-5", rel)
				}
			})
		}
	}
}

// TestGroupOnEngines: members on engines (nn's CPU engine: the gradient
// crosses to the host for the all-reduce and back, the online parameters
// come back on Sync), one of them with an empty part, take the very same
// steps as members without, bit for bit, target copies included.
func TestGroupOnEngines(t *testing.T) {
	repo := workertest.Repo(t)
	spec := nn.Spec{ObsDim: 4, Hidden: []int{16}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}
	cfg := DefaultConfig()
	cfg.Dueling, cfg.TargetUpdateEvery = true, 3
	const updates, size = 8, 3
	bounds := []int{0, 40, 40, 64} // rank 1's part is empty
	rng := rand.New(rand.NewPCG(3, 3))
	data := make([]*Batch, updates)
	for u := range data {
		data[u] = groupBatch(rng, 64, spec)
	}
	var runs [][]float32
	for _, engine := range []bool{false, true} {
		params := make([][]float32, size)
		o := collective.Options{Repo: repo, Trial: names.NewTrial("dqngroup", fmt.Sprintf("engines-%v", engine)), Name: "trainer/default", Hash: "h"}
		errs := grouptest.Run(workertest.Ctx(t, 60*time.Second), o, size, func(ctx context.Context, g *collective.Group) error {
			l, err := NewLearner(spec, cfg, 1)
			if err != nil {
				return err
			}
			if engine {
				if err := l.SetEngine(nn.NewCPUEngine); err != nil {
					return err
				}
				defer l.Close()
			}
			for _, b := range data {
				if _, _, err := l.UpdateGroup(ctx, b.part(bounds[g.Rank()], bounds[g.Rank()+1], spec.ObsDim), nil, g); err != nil {
					return err
				}
			}
			if err := l.Sync(); err != nil {
				return err
			}
			params[g.Rank()] = append([]float32(nil), l.Online().Params()...)
			return nil
		})
		grouptest.NoErrors(t, errs)
		grouptest.SameBits(t, params)
		runs = append(runs, params[0])
	}
	grouptest.SameBits(t, runs)
}

// A member whose batch is empty still takes part; a member whose loss is
// not finite makes every member skip the step, and nothing changes.
func TestGroupSkipsTogether(t *testing.T) {
	repo := workertest.Repo(t)
	spec := testSpec()
	const size = 2
	o := collective.Options{Repo: repo, Trial: names.NewTrial("dqngroup", "skip"), Name: "trainer/default", Hash: "h"}
	errs := grouptest.Run(workertest.Ctx(t, 30*time.Second), o, size, func(ctx context.Context, g *collective.Group) error {
		l, err := NewLearner(spec, DefaultConfig(), 1)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(1, uint64(g.Rank())))
		b := randBatch(rng, 8)
		if g.Rank() == 1 {
			b = &Batch{} // empty: the step still happens, on rank 0's samples
		}
		before := append([]float32(nil), l.Online().Params()...)
		if _, _, err := l.UpdateGroup(ctx, b, nil, g); err != nil {
			return fmt.Errorf("a step with one empty part: %w", err)
		}
		if l.Updates() != 1 || equal(before, l.Online().Params()) {
			return fmt.Errorf("no step taken (%d updates)", l.Updates())
		}
		b = randBatch(rng, 8)
		if g.Rank() == 0 {
			b.Rewards[0] = float32(math.Inf(1))
		}
		before = append(before[:0], l.Online().Params()...)
		if _, _, err := l.UpdateGroup(ctx, b, nil, g); !errors.Is(err, ErrGroupSkipped) {
			return fmt.Errorf("rank 0's loss is infinite: UpdateGroup gave %v, want ErrGroupSkipped", err)
		}
		if l.Updates() != 1 || !equal(before, l.Online().Params()) {
			return fmt.Errorf("a skipped step changed the learner (%d updates)", l.Updates())
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// groupBatch is a batch of n random transitions for spec's network.
func groupBatch(r *rand.Rand, n int, spec nn.Spec) *Batch {
	b := &Batch{}
	for i := range n {
		for range spec.ObsDim {
			b.Obs = append(b.Obs, float32(r.NormFloat64()))
			b.NextObs = append(b.NextObs, float32(r.NormFloat64()))
		}
		b.Actions = append(b.Actions, int32(r.IntN(spec.ActionDim)))
		b.Rewards = append(b.Rewards, float32(r.NormFloat64()*2))
		b.Discounts = append(b.Discounts, []float32{0, 0.9, 0.81}[i%3])
		b.Weights = append(b.Weights, float32(0.2+r.Float64()))
	}
	return b
}

// part is the samples [lo, hi) of b.
func (b *Batch) part(lo, hi, obsDim int) *Batch {
	return &Batch{Obs: b.Obs[lo*obsDim : hi*obsDim], NextObs: b.NextObs[lo*obsDim : hi*obsDim], Actions: b.Actions[lo:hi],
		Rewards: b.Rewards[lo:hi], Discounts: b.Discounts[lo:hi], Weights: b.Weights[lo:hi]}
}
