package ppo

import (
	"fmt"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/policy"
)

// collector runs a sampling policy in several CartPole environments in
// lock step, as a vectorised actor would, and cuts each environment's
// trajectory into SampleBatches the way actorworker does: a batch ends at
// every episode end (bootstrap 0 if terminated, the value of the final
// observation if truncated) and at the end of each rollout (bootstrap the
// value of the next observation).
type collector struct {
	pol      *policy.ActorCritic
	envs     []*env.CartPole
	obs      [][]float32 // each environment's current observation
	builders []*api.SampleBuilder
	seed     int64
	resets   int64 // episodes started, which seeds the next Reset

	batch      api.Tensor[float32] // [len(envs), 4] observations for Infer
	inf, final api.Inference
	actions    [1]api.Action

	steps   int       // environment steps taken
	returns []float32 // returns of the finished episodes, in order
}

func newCollector(tb testing.TB, pol *policy.ActorCritic, numEnvs int, seed int64) *collector {
	tb.Helper()
	c := &collector{pol: pol, seed: seed, batch: api.NewTensor[float32](numEnvs, 4)}
	for range numEnvs {
		e, err := env.NewCartPole(env.CartPoleMaxSteps)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := api.NewSampleBuilder(4, 0, 128)
		if err != nil {
			tb.Fatal(err)
		}
		c.envs = append(c.envs, e)
		c.builders = append(c.builders, b)
		c.obs = append(c.obs, nil)
	}
	for i := range c.envs {
		if err := c.reset(i); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

func (c *collector) reset(i int) error {
	obs, err := c.envs[i].Reset(c.seed*1_000_003 + c.resets)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	c.resets++
	c.obs[i] = obs[0]
	return nil
}

// infer runs the policy on every environment's current observation.
func (c *collector) infer() error {
	for i, o := range c.obs {
		copy(c.batch.Data[i*4:], o)
	}
	return c.pol.Infer(c.batch, &c.inf)
}

// collect steps every environment steps times and returns the batches.
func (c *collector) collect(steps int) ([]*api.SampleBatch, error) {
	var out []*api.SampleBatch
	build := func(i int, bootstrap float32) {
		b := c.builders[i].Build(bootstrap)
		out = append(out, &b)
		for _, e := range b.Episodes {
			c.returns = append(c.returns, e.Return)
		}
	}
	for range steps {
		if err := c.infer(); err != nil {
			return nil, err
		}
		for i, e := range c.envs {
			c.actions[0] = api.Action{Discrete: c.inf.Actions.Data[i]}
			st, err := e.Step(c.actions[:])
			if err != nil {
				return nil, err
			}
			term, trunc := st.Terminated[0], st.Truncated[0]
			if err := c.builders[i].Append(api.StepRecord{
				Obs: c.obs[i], Action: c.actions[0], Reward: st.Rewards[0],
				Terminated: term, Truncated: trunc,
				LogProb: c.inf.LogProbs.Data[i], Value: c.inf.Values.Data[i], Version: c.inf.Version,
			}); err != nil {
				return nil, err
			}
			c.steps++
			switch {
			case term:
				build(i, 0)
			case trunc:
				// The episode was cut by the time limit: its return goes
				// on past the final observation, so bootstrap from it.
				t := api.Tensor[float32]{Shape: []int{1, 4}, Data: st.Obs[0]}
				if err := c.pol.Infer(t, &c.final); err != nil {
					return nil, err
				}
				build(i, c.final.Values.Data[0])
			default:
				// Copied: the env's Step may reuse its memory (api.Env).
				c.obs[i] = append(c.obs[i][:0], st.Obs[0]...)
				continue
			}
			if err := c.reset(i); err != nil {
				return nil, err
			}
		}
	}
	// Cut the running episodes, bootstrapping from the next observation.
	if err := c.infer(); err != nil {
		return nil, err
	}
	for i, b := range c.builders {
		if b.Len() > 0 {
			build(i, c.inf.Values.Data[i])
		}
	}
	return out, nil
}

// meanLast returns the mean of the last k episode returns, or 0 if fewer
// than k episodes have finished.
func (c *collector) meanLast(k int) float64 {
	if len(c.returns) < k {
		return 0
	}
	var s float64
	for _, r := range c.returns[len(c.returns)-k:] {
		s += float64(r)
	}
	return s / float64(k)
}
